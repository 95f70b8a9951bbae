// dist/store_server.cpp: the TCP store's poll() loop on rank 0 (see store_server.hpp).
#include "dist/store_server.hpp"

#include "dist/error.hpp"
#include "dist/store_protocol.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ampgrad::dist {

namespace {

// Binds a listening socket to host:port; host "" or "0.0.0.0" listens on every interface.
int listen_on(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    std::string port_str = std::to_string(port);
    int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_str.c_str(), &hints, &res);
    if (rc != 0)
        throw StoreError(fmt::format("TCP store: cannot resolve MASTER_ADDR '{}': {}", host, gai_strerror(rc)));
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        int err = errno;
        close(fd);
        freeaddrinfo(res);
        throw StoreError(fmt::format(
            "TCP store: rank 0 cannot listen on {}:{} (MASTER_ADDR:MASTER_PORT): {}{}", host, port,
            std::strerror(err), err == EADDRINUSE ? " (another process holds this port: pick another MASTER_PORT)" : ""));
    }
    freeaddrinfo(res);
    return fd;
}

}  // namespace

TCPStoreServer::TCPStoreServer(const std::string& host, int port) {
    listen_fd_ = listen_on(host, port);
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (pipe2(wake_pipe_, O_CLOEXEC) != 0) {
        close(listen_fd_);
        throw StoreError(fmt::format("TCP store: pipe: {}", std::strerror(errno)));
    }
    thread_ = std::thread([this] { loop(); });
}

TCPStoreServer::~TCPStoreServer() {
    char b = 1;
    (void)!write(wake_pipe_[1], &b, 1);
    if (thread_.joinable()) thread_.join();
    for (auto& [fd, c] : clients_) close(fd);
    close(listen_fd_);
    close(wake_pipe_[0]);
    close(wake_pipe_[1]);
}

void TCPStoreServer::loop() {
    for (;;) {
        std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
        for (auto& [fd, c] : clients_) fds.push_back({fd, POLLIN, 0});
        if (poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (fds[0].revents) return;   // the destructor asks us to stop
        if (fds[1].revents & POLLIN) accept_client();
        for (size_t i = 2; i < fds.size(); ++i) {
            if (!fds[i].revents) continue;
            auto it = clients_.find(fds[i].fd);
            if (it != clients_.end() && !read_client(it->second)) {
                int fd = it->first;
                close(fd);
                clients_.erase(it);
                std::erase_if(parked_, [fd](const Parked& p) { return p.fd == fd; });
                if (auto w = on_close_.find(fd); w != on_close_.end()) {
                    data_[w->second] = {'1'};
                    on_close_.erase(w);
                    answer_parked();
                }
            }
        }
    }
}

void TCPStoreServer::accept_client() {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    clients_[fd] = Client{fd, {}};
}

// Reads what is available and handles each complete frame.
bool TCPStoreServer::read_client(Client& c) {
    char buf[65536];
    ssize_t n = recv(c.fd, buf, sizeof buf, 0);
    if (n <= 0) return n < 0 && (errno == EINTR || errno == EAGAIN);
    c.inbox.insert(c.inbox.end(), buf, buf + n);
    while (c.inbox.size() >= 4) {
        uint32_t len;
        std::memcpy(&len, c.inbox.data(), 4);
        if (c.inbox.size() < 4 + static_cast<size_t>(len)) break;
        std::vector<char> payload(c.inbox.begin() + 4, c.inbox.begin() + 4 + len);
        c.inbox.erase(c.inbox.begin(), c.inbox.begin() + 4 + len);
        handle(c.fd, payload);
    }
    return true;
}

void TCPStoreServer::handle(int fd, const std::vector<char>& payload) {
    if (payload.empty()) return;
    wire::Reader r{payload.data() + 1, payload.data() + payload.size()};
    switch (static_cast<wire::Op>(payload[0])) {
    case wire::Op::kSet: {
        std::string key = r.str();
        std::string value = r.str();
        data_[key] = std::vector<char>(value.begin(), value.end());
        reply(fd, {});
        answer_parked();
        break;
    }
    case wire::Op::kGet:
    case wire::Op::kWait: {
        bool is_get = static_cast<wire::Op>(payload[0]) == wire::Op::kGet;
        uint32_t n = is_get ? 1 : r.u32();
        std::vector<std::string> keys;
        for (uint32_t i = 0; i < n && r.ok; ++i) keys.push_back(r.str());
        parked_.push_back({fd, std::move(keys), is_get});
        answer_parked();
        break;
    }
    case wire::Op::kAdd: {
        std::string key = r.str();
        int64_t delta = std::stoll(r.str());
        auto& v = data_[key];
        int64_t now = (v.empty() ? 0 : std::stoll(std::string(v.begin(), v.end()))) + delta;
        std::string text = std::to_string(now);
        v.assign(text.begin(), text.end());
        reply(fd, v);
        answer_parked();
        break;
    }
    case wire::Op::kWatch: {
        std::string key = r.str();
        on_close_[fd] = key;
        data_.erase(key);          // a reconnecting client is alive again
        reply(fd, {});
        break;
    }
    case wire::Op::kCheck: {
        uint32_t n = r.u32();
        std::vector<std::string> keys;
        for (uint32_t i = 0; i < n && r.ok; ++i) keys.push_back(r.str());
        reply(fd, {static_cast<char>(has_all(keys) ? 1 : 0)});
        break;
    }
    }
}

bool TCPStoreServer::has_all(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
        if (!data_.count(k)) return false;
    return true;
}

void TCPStoreServer::answer_parked() {
    for (size_t i = 0; i < parked_.size();) {
        if (!has_all(parked_[i].keys)) { ++i; continue; }
        Parked p = std::move(parked_[i]);
        parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
        reply(p.fd, p.is_get ? data_.at(p.keys[0]) : std::vector<char>{});
    }
}

// Small replies to a blocking socket; a client that died is noticed by the next poll.
void TCPStoreServer::reply(int fd, const std::vector<char>& payload) {
    std::vector<char> out = wire::frame(payload);
    size_t sent = 0;
    while (sent < out.size()) {
        ssize_t n = send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        sent += static_cast<size_t>(n);
    }
}

}  // namespace ampgrad::dist
