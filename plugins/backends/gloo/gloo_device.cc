/* Which address the gloo TCP device binds, and one device per address per
 * process (each device runs an epoll thread; groups can share it). */
#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <gloo/transport/tcp/device.h>

#include "gloo_group.h"

namespace ltgloo {
namespace {

bool is_loopback(const sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in *>(sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr);
    return false;
}

/* The local address the kernel would use to reach host: a UDP connect()
 * sends nothing but fills in the source address. "" when it cannot tell. */
std::string route_to(const char *host) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, "9", &hints, &res) || !res) return "";
    std::string out;
    if (is_loopback(res->ai_addr)) {
        out = "127.0.0.1";
    } else {
        int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        char buf[INET6_ADDRSTRLEN] = "";
        if (fd >= 0 && !connect(fd, res->ai_addr, res->ai_addrlen) &&
            !getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len)) {
            const void *a = ss.ss_family == AF_INET
                                ? (const void *)&reinterpret_cast<sockaddr_in *>(&ss)->sin_addr
                                : (const void *)&reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_addr;
            if (inet_ntop(ss.ss_family, a, buf, sizeof buf)) out = buf;
        }
        if (fd >= 0) close(fd);
    }
    freeaddrinfo(res);
    return out;
}

gloo::transport::tcp::attr pick_attr(const char *iface, const char *main_address, std::string &where) {
    gloo::transport::tcp::attr attr;
    std::string name = iface && *iface ? iface : "";
    if (name.empty()) {
        const char *env = getenv("GLOO_SOCKET_IFNAME"); /* what PyTorch users already set */
        if (env && *env) name = env;
    }
    if (!name.empty()) {
        if (if_nametoindex(name.c_str())) {
            attr.iface = name;
            where = "interface " + name;
        } else {
            attr.hostname = name;
            where = name;
        }
        return attr;
    }
    const char *master = main_address && *main_address ? main_address : getenv("MASTER_ADDR");
    std::string addr = master && *master ? route_to(master) : "127.0.0.1";
    if (addr.empty()) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        addr = host;
    }
    attr.hostname = addr;
    where = addr;
    return attr;
}

} // namespace

std::shared_ptr<gloo::transport::Device> shared_device(const char *iface, const char *main_address,
                                                       std::string &where) {
    static std::mutex mu;
    static std::map<std::string, std::weak_ptr<gloo::transport::Device>> cache;
    gloo::transport::tcp::attr attr = pick_attr(iface, main_address, where);
    std::string key = attr.hostname + "|" + attr.iface;
    std::lock_guard<std::mutex> lock(mu);
    if (auto dev = cache[key].lock()) return dev;
    auto dev = gloo::transport::tcp::CreateDevice(attr); /* throws on a bad address */
    cache[key] = dev;
    return dev;
}

} // namespace ltgloo
