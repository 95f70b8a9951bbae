// dist/socket_address.hpp: which local address a rank listens on and advertises to its peers.
// The rule (docs/distributed.md, "Which address"): GLOO_SOCKET_IFNAME, else AMPGRAD_SOCKET_IFNAME,
// names an interface; otherwise the kernel is asked which local address routes to MASTER_ADDR (a
// UDP socket "connected" to it, then getsockname: no packet is sent). That address is reachable
// by the master's host, unlike what gethostname() may resolve to (127.0.1.1 on many images).
#pragma once
#include <string>

namespace ampgrad::dist {

struct SocketChoice {
    std::string iface;     // an interface named by GLOO_SOCKET_IFNAME / AMPGRAD_SOCKET_IFNAME, or ""
    std::string address;   // the IPv4 address to listen on and advertise
    std::string reason;    // how it was chosen, for messages: "GLOO_SOCKET_IFNAME=eth1", "route to 10.0.0.1"
};

// The local IPv4 address the kernel would send from to reach host:port. DistError naming the host
// when it cannot be resolved or has no route.
std::string route_source_address(const std::string& host, int port);

// The IPv4 address of interface `iface`. DistError naming the interface and the ones there are.
std::string interface_address(const std::string& iface, const std::string& variable);

// The rule above, for a rank whose master is master_addr:master_port.
SocketChoice choose_socket(const std::string& master_addr, int master_port);

// "hostname (address)": how messages name a rank's host.
std::string host_description(const std::string& address);

}  // namespace ampgrad::dist
