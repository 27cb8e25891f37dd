/* Keelson's pause image: holds the pod sandbox's namespaces. Sleeps until SIGINT/SIGTERM and
 * reaps orphans (it is PID 1 of the sandbox's PID namespace when that is shared). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; _exit(0); }

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction term = {.sa_handler = on_term};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &term, NULL);
  sigaction(SIGTERM, &term, NULL);
  sigaction(SIGCHLD, &child, NULL);
  for (;;) pause();
}
