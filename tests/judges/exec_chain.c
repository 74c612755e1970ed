/* For tests/exec_children.rs: two chains of processes, each generation forking the next
   and exiting at once, so no process is where a walk of /proc saw it a moment before. Each
   chain ends itself after 20 s, should it escape. */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(void) {
    time_t start = time(NULL);
    for (int c = 0; c < 2; c++) {
        if (fork() == 0) {
            for (;;) {
                pid_t p = fork();
                if (p > 0) _exit(0);
                /* A generation lives about a millisecond (as long as a walk of /proc takes). */
                usleep(1000);
                if (time(NULL) - start > 20) _exit(0);
            }
        }
    }
    return 0;
}
