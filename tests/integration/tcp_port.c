/* tcp_port free        prints a TCP port that is free on 127.0.0.1 now
 * tcp_port pair        prints a port P such that P and P + 1 are both free
 *                      (torchrun's MASTER_PORT, and lt's store on the next one)
 * tcp_port hold PORT   listens on 127.0.0.1:PORT (0: any), prints the port,
 *                      and keeps it until killed
 * A helper for the launcher tests: a port to pass as --master-port, and a
 * port some other program already holds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A socket bound to 127.0.0.1:port (0: any); -1 when taken. */
static int bind_port(int port, int *bound) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    a.sin_port = htons((uint16_t)port);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

int main(int argc, char **argv) {
    int hold = argc >= 2 && !strcmp(argv[1], "hold");
    int pair = argc >= 2 && !strcmp(argv[1], "pair");
    if (argc < 2 || (!hold && !pair && strcmp(argv[1], "free"))) {
        fprintf(stderr, "usage: tcp_port free | tcp_port pair | tcp_port hold PORT\n");
        return 2;
    }
    int port = 0;
    int fd = bind_port(hold && argc >= 3 ? atoi(argv[2]) : 0, &port);
    bool paired = !pair;
    for (int tries = 0; pair && fd >= 0 && tries < 100 && !paired; tries++) {
        int next, fd2 = port < 65535 ? bind_port(port + 1, &next) : -1;
        if (fd2 >= 0) {
            close(fd2);
            paired = true;
            break;
        }
        close(fd);
        fd = bind_port(0, &port);
    }
    if (fd >= 0 && !paired) {
        fprintf(stderr, "tcp_port: no free pair of neighbouring ports found in 100 tries\n");
        return 1;
    }
    if (fd < 0 || (hold && listen(fd, 16))) {
        perror("tcp_port");
        return 1;
    }
    printf("%d\n", port);
    fflush(stdout);
    if (hold)
        for (;;) pause();
    close(fd);
    return 0;
}
