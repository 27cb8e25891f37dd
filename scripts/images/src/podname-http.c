/* Keelson's HTTP test server: answers every request with the pod's name (the sandbox hostname,
 * or $POD_NAME when set) and logs one line per request to stdout, so tests can check both the
 * pod's network and `kubectl logs`. Port: $PORT or 8080. GET /status/NNN answers with code NNN
 * (for probe tests). Each log line ends with the client's address as seen here ("from 10.244.7.5"),
 * so tests can tell whether a connection was masqueraded on its way. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; _exit(0); }

int main(void) {
  char name[256] = {0};
  const char *env_name = getenv("POD_NAME");
  if (env_name && *env_name) snprintf(name, sizeof name, "%s", env_name);
  else gethostname(name, sizeof name - 1);
  const char *port_env = getenv("PORT");
  int port = port_env ? atoi(port_env) : 8080;
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);

  int s = socket(AF_INET6, SOCK_STREAM, 0);
  int v6only = 0, reuse = 1;
  setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof reuse);
  struct sockaddr_in6 addr = {.sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_any};
  if (bind(s, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(s, 128) != 0) {
    perror("podname-http: bind/listen");
    return 1;
  }
  printf("podname-http: %s listening on port %d\n", name, port);
  for (;;) {
    struct sockaddr_in6 peer;
    socklen_t peer_len = sizeof peer;
    int c = accept(s, (struct sockaddr *)&peer, &peer_len);
    if (c < 0) continue;
    char from[INET6_ADDRSTRLEN] = "?";
    if (IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr))
      inet_ntop(AF_INET, &peer.sin6_addr.s6_addr[12], from, sizeof from);
    else
      inet_ntop(AF_INET6, &peer.sin6_addr, from, sizeof from);
    char req[2048] = {0};
    ssize_t n = read(c, req, sizeof req - 1);
    if (n <= 0) { close(c); continue; }
    char method[16] = {0}, path[512] = {0};
    sscanf(req, "%15s %511s", method, path);
    int code = 200;
    if (strncmp(path, "/status/", 8) == 0) code = atoi(path + 8);
    if (code < 100 || code > 599) code = 400;
    char body[512];
    int blen = snprintf(body, sizeof body, "%s\n", name);
    char head[256];
    int hlen = snprintf(head, sizeof head,
                        "HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
                        code, blen);
    write(c, head, hlen);
    write(c, body, blen);
    close(c);
    printf("%s %s -> %d from %s\n", method, path, code, from);
  }
}
