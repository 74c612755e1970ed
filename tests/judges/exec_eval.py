"""An exec handler for tests/judges.rs: the check as JSON on stdin, the verdict as JSON on
stdout. Scores 0 when the content holds "FORBIDDEN"; with "HANG" in it, writes its pid to the
file named by $PID_FILE and sleeps (guardwire must kill it at the deadline); with "CRASH",
exits 3. Writes what it was given to $INPUT_FILE."""

import json
import os
import sys
import time

check = json.load(sys.stdin)
with open(os.environ["INPUT_FILE"], "w", encoding="utf-8") as f:
    json.dump({"check": check, "env": dict(os.environ)}, f)
content = check["content"]
if "HANG" in content:
    with open(os.environ["PID_FILE"], "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
if "CRASH" in content:
    sys.exit(3)
score = 0.0 if "FORBIDDEN" in content else 1.0
print(json.dumps({"score": score, "detail": "checked", "data": {"length": len(content)}}))
