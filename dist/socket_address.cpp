// dist/socket_address.cpp: the address a rank advertises (dist/socket_address.hpp).
#include "dist/socket_address.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "dist/error.hpp"

namespace ampgrad::dist {

std::string route_source_address(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0)
        throw DistError(fmt::format("init_process_group: cannot resolve MASTER_ADDR '{}': {}", host, gai_strerror(rc)));
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in local{};
    socklen_t len = sizeof local;
    // connect() on a UDP socket only picks the route and the source address; nothing is sent.
    const bool ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    const int err = errno;
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    if (!ok)
        throw DistError(fmt::format("init_process_group: no route from this host to MASTER_ADDR {}:{}: {} (set "
                                    "GLOO_SOCKET_IFNAME to the interface that reaches it)", host, port, std::strerror(err)));
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
    return text;
}

std::string interface_address(const std::string& iface, const std::string& variable) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        throw DistError(fmt::format("init_process_group: {}={}: cannot list the interfaces: {}", variable, iface,
                                    std::strerror(errno)));
    std::string found, names;
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
        if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
        char text[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
        names += fmt::format("{}{} ({})", names.empty() ? "" : ", ", a->ifa_name, text);
        if (found.empty() && iface == a->ifa_name) found = text;
    }
    freeifaddrs(list);
    if (found.empty())
        throw DistError(fmt::format("init_process_group: {}={}: this host has no interface of that name with an IPv4 "
                                    "address; it has: {}", variable, iface, names.empty() ? "none" : names));
    return found;
}

SocketChoice choose_socket(const std::string& master_addr, int master_port) {
    for (const char* variable : {"GLOO_SOCKET_IFNAME", "AMPGRAD_SOCKET_IFNAME"}) {
        const char* iface = std::getenv(variable);
        if (iface == nullptr || *iface == '\0') continue;
        return {iface, interface_address(iface, variable), fmt::format("{}={}", variable, iface)};
    }
    return {"", route_source_address(master_addr, master_port), fmt::format("the route to MASTER_ADDR {}", master_addr)};
}

std::string host_description(const std::string& address) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return fmt::format("{} ({})", name, address);
}

}  // namespace ampgrad::dist
