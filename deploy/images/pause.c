/*
 * fleetgate-pause: the sandbox process of a fleetgate test pod. It holds the pod's namespaces
 * and does nothing else: reaps any child re-parented to it (SIGCHLD), exits 0 on SIGINT or
 * SIGTERM, and otherwise sleeps in pause() forever.
 *
 * Built static (gcc -static -Os) by deploy/images/build.sh into a FROM-scratch image.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

static int handle(int sig, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    puts("fleetgate-pause 1");
    return 0;
  }
  if (getpid() != 1) {
    fputs("fleetgate-pause: warning: not pid 1\n", stderr);
  }
  if (handle(SIGINT, on_stop) < 0 || handle(SIGTERM, on_stop) < 0 ||
      handle(SIGCHLD, on_child) < 0) {
    perror("fleetgate-pause: sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
}
