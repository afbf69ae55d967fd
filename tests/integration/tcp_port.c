/* tcp_port free        prints a TCP port that is free on 127.0.0.1 now
 * tcp_port hold PORT   listens on 127.0.0.1:PORT (0: any), prints the port,
 *                      and keeps it until killed
 * A helper for the launcher tests: a port to pass as --master-port, and a
 * port some other program already holds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int hold = argc >= 2 && !strcmp(argv[1], "hold");
    if (argc < 2 || (!hold && strcmp(argv[1], "free"))) {
        fprintf(stderr, "usage: tcp_port free | tcp_port hold PORT\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    a.sin_port = htons(hold && argc >= 3 ? (uint16_t)atoi(argv[2]) : 0);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len) ||
        (hold && listen(fd, 16))) {
        perror("tcp_port");
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    if (hold)
        for (;;) pause();
    close(fd);
    return 0;
}
