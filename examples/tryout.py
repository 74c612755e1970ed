"""The README's tryout with the official OpenAI Python SDK: guardwire on 127.0.0.1:8080 in front
of the echo upstream (examples/echo_upstream.rs, examples/tryout.yaml). Only the base URL
changes; the key is not checked by the echo upstream.

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=unused python examples/tryout.py
"""

import openai

client = openai.OpenAI()


def ask(text):
    stream = client.chat.completions.create(
        model="echo",
        stream=True,
        messages=[{"role": "user", "content": text}],
    )
    received = ""
    try:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received += chunk.choices[0].delta.content
        print(f"clean:   {received!r}")
    except openai.APIError as e:
        print(f"blocked: {received!r}, then {type(e).__name__}: {e.message}")


ask("hello there")
ask("tell me about project bluebird today")
