/* Finding the sockets under a gloo context's pairs, which gloo keeps private,
 * for two things its API does not offer:
 *
 *  - interrupting: gloo cannot cancel a collective, and closeConnections()
 *    closes the pairs without failing the operations waiting on them (those
 *    then sit until gloo's timeout). A socket shut down under a pair, though,
 *    reads as end-of-file on gloo's event loop, which fails every pending
 *    operation of the pair at once, closes it, and sends FIN to the peer,
 *    whose operations fail the same way.
 *  - naming peers: gloo's errors name a peer by address ("Connection closed by
 *    peer [10.0.0.2]:41234"); the socket's remote address maps it to a rank.
 *
 * Each pair's socket has its own local port, so a pair's own address (public,
 * as bytes) finds its descriptor among this process's. Only the TCP
 * transport is used, so every pair's address is a tcp::Address. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>

#include "gloo_group.h"

namespace ltgloo {
namespace {

bool same_endpoint(const sockaddr_storage &a, const sockaddr_storage &b) {
    if (a.ss_family != b.ss_family) return false;
    if (a.ss_family == AF_INET) {
        auto &x = reinterpret_cast<const sockaddr_in &>(a);
        auto &y = reinterpret_cast<const sockaddr_in &>(b);
        return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
    }
    if (a.ss_family == AF_INET6) {
        auto &x = reinterpret_cast<const sockaddr_in6 &>(a);
        auto &y = reinterpret_cast<const sockaddr_in6 &>(b);
        return x.sin6_port == y.sin6_port && !memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr);
    }
    return false;
}

/* The descriptor of each pair's socket by peer rank; -1 for self or unknown. */
std::vector<int> pair_fds(gloo::Context &ctx) {
    std::vector<int> fds(ctx.size, -1);
    std::vector<sockaddr_storage> mine(ctx.size);
    bool any = false;
    for (int i = 0; i < ctx.size; i++) {
        if (i == ctx.rank) continue;
        auto &p = ctx.getPair(i);
        if (!p) continue;
        /* Debian's gloo headers for tcp::Pair do not compile (they include a
         * header the package lacks), so go through the generic address: its
         * bytes are the tcp address's serialized form. */
        gloo::transport::tcp::Address a(p->address().bytes());
        mine[i] = a.getSockaddr();
        any = true;
    }
    DIR *d = any ? opendir("/proc/self/fd") : nullptr;
    if (!d) return fds;
    while (dirent *e = readdir(d)) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || fd < 0 || fd == dirfd(d)) continue;
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        if (getsockname((int)fd, reinterpret_cast<sockaddr *>(&ss), &len)) continue;
        for (int i = 0; i < ctx.size; i++) {
            if (i != ctx.rank && same_endpoint(ss, mine[i])) {
                fds[i] = (int)fd;
                break;
            }
        }
    }
    closedir(d);
    return fds;
}

} // namespace

int interrupt_context(gloo::Context &ctx) {
    int n = 0;
    for (int fd : pair_fds(ctx))
        if (fd >= 0 && !shutdown(fd, SHUT_RDWR)) n++;
    return n;
}

std::vector<std::vector<std::string>> peer_addresses(gloo::Context &ctx) {
    std::vector<std::vector<std::string>> out(ctx.size);
    std::vector<int> fds = pair_fds(ctx);
    for (int i = 0; i < ctx.size; i++) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        if (fds[i] < 0 || getpeername(fds[i], reinterpret_cast<sockaddr *>(&ss), &len)) continue;
        char host[INET6_ADDRSTRLEN] = "";
        uint16_t port;
        if (ss.ss_family == AF_INET) {
            auto &a = reinterpret_cast<const sockaddr_in &>(ss);
            inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
            port = a.sin_port;
        } else {
            auto &a = reinterpret_cast<const sockaddr_in6 &>(ss);
            inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof host);
            port = a.sin6_port;
        }
        /* This gloo prints the port in network byte order; a fixed one would
         * print it in host order: match either. */
        for (unsigned p : {(unsigned)port, (unsigned)ntohs(port)}) {
            char buf[INET6_ADDRSTRLEN + 16];
            snprintf(buf, sizeof buf, "[%s]:%u", host, p);
            out[i].push_back(buf);
        }
    }
    return out;
}

} // namespace ltgloo
