// dist/store.cpp: the TCP store's client side (see store.hpp); the server is store_server.cpp.
#include "dist/store.hpp"

#include "dist/error.hpp"
#include "dist/store_protocol.hpp"
#include "dist/store_server.hpp"

#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace ampgrad::dist {

namespace {

using Clock = std::chrono::steady_clock;

// One connect attempt; returns the socket or -1 with errno set.
int try_connect(const std::string& host, int port, std::string& why) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) { why = gai_strerror(rc); return -1; }
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
    if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        why = std::strerror(errno);
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

std::string keys_text(const std::vector<std::string>& keys) {
    std::string s;
    for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
    return s;
}

}  // namespace

TCPStore::TCPStore(std::string host, int port, bool is_server, Millis timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {
    if (is_server) {
        server_ = std::make_unique<TCPStoreServer>(host_, port_);
        port_ = server_->port();
    }
    connect_to_server();
}

TCPStore::~TCPStore() {
    drop_connection();
    server_.reset();
}

bool TCPStore::connected() {
    std::lock_guard lk(mutex_);
    return fd_ >= 0;
}

void TCPStore::drop_connection() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

// Retries until the timeout: workers may start before rank 0 listens.
void TCPStore::connect_to_server() {
    auto deadline = Clock::now() + timeout_;
    std::string why;
    for (;;) {
        fd_ = try_connect(host_, port_, why);
        if (fd_ >= 0) return;
        if (Clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw StoreError(fmt::format(
        "TCP store: cannot reach the master at {}:{} (MASTER_ADDR:MASTER_PORT) within {} ms: {}",
        host_, port_, timeout_.count(), why));
}

void TCPStore::send_request(const std::vector<char>& payload, const char* op, const std::string& key) {
    if (fd_ < 0) {
        connect_to_server();
        if (!on_disconnect_key_.empty()) set_on_disconnect(on_disconnect_key_);
    }
    std::vector<char> out = wire::frame(payload);
    size_t sent = 0;
    while (sent < out.size()) {
        ssize_t n = send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            std::string err = std::strerror(errno);
            drop_connection();
            throw StoreError(fmt::format("TCP store {} of key {}: lost the connection to {}:{}: {}", op, key,
                                         host_, port_, err));
        }
        sent += static_cast<size_t>(n);
    }
}

// Reads one reply frame, waiting at most `timeout`. On timeout the connection is dropped (a late
// reply would otherwise be read as the answer to the next request).
std::vector<char> TCPStore::read_reply(const char* op, const std::string& key, Millis timeout) {
    auto deadline = Clock::now() + timeout;
    std::vector<char> buf;
    size_t want = 4;
    bool have_len = false;
    while (buf.size() < want) {
        auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
        pollfd p{fd_, POLLIN, 0};
        int rc = left > 0 ? poll(&p, 1, static_cast<int>(left)) : 0;
        if (rc < 0 && errno == EINTR) continue;
        if (rc == 0) {
            drop_connection();
            throw DistTimeoutError(fmt::format("TCP store {} of key {} timed out after {} ms (store at {}:{})", op,
                                               key, timeout.count(), host_, port_));
        }
        char chunk[65536];
        ssize_t n = recv(fd_, chunk, std::min(sizeof chunk, want - buf.size()), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            drop_connection();
            throw StoreError(fmt::format("TCP store {} of key {}: the store at {}:{} closed the connection "
                                         "(rank 0, which hosts it, may have exited)", op, key, host_, port_));
        }
        buf.insert(buf.end(), chunk, chunk + n);
        if (!have_len && buf.size() == 4) {
            uint32_t len;
            std::memcpy(&len, buf.data(), 4);
            want = 4 + len;
            have_len = true;
        }
    }
    return std::vector<char>(buf.begin() + 4, buf.end());
}

void TCPStore::set(const std::string& key, const std::vector<char>& value) {
    std::lock_guard lock(mutex_);
    std::vector<char> msg = wire::request(wire::Op::kSet);
    wire::put_string(msg, key);
    wire::put_bytes(msg, value.data(), value.size());
    send_request(msg, "set", "'" + key + "'");
    read_reply("set", "'" + key + "'", timeout_);
}

std::vector<char> TCPStore::get(const std::string& key) { return get(key, timeout_); }

std::vector<char> TCPStore::get(const std::string& key, Millis timeout) {
    std::lock_guard lock(mutex_);
    std::vector<char> msg = wire::request(wire::Op::kGet);
    wire::put_string(msg, key);
    send_request(msg, "get", "'" + key + "'");
    return read_reply("get", "'" + key + "'", timeout);
}

void TCPStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TCPStore::wait(const std::vector<std::string>& keys, Millis timeout) {
    std::lock_guard lock(mutex_);
    std::vector<char> msg = wire::request(wire::Op::kWait);
    wire::put_u32(msg, static_cast<uint32_t>(keys.size()));
    for (const auto& k : keys) wire::put_string(msg, k);
    send_request(msg, "wait", keys_text(keys));
    read_reply("wait", keys_text(keys), timeout);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
    std::lock_guard lock(mutex_);
    std::vector<char> msg = wire::request(wire::Op::kAdd);
    wire::put_string(msg, key);
    wire::put_string(msg, std::to_string(delta));
    send_request(msg, "add", "'" + key + "'");
    std::vector<char> r = read_reply("add", "'" + key + "'", timeout_);
    return std::stoll(std::string(r.begin(), r.end()));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
    std::lock_guard lock(mutex_);
    std::vector<char> msg = wire::request(wire::Op::kCheck);
    wire::put_u32(msg, static_cast<uint32_t>(keys.size()));
    for (const auto& k : keys) wire::put_string(msg, k);
    send_request(msg, "check", keys_text(keys));
    std::vector<char> r = read_reply("check", keys_text(keys), timeout_);
    return !r.empty() && r[0] == 1;
}

void TCPStore::set_on_disconnect(const std::string& key) {
    std::lock_guard lock(mutex_);
    on_disconnect_key_ = key;
    std::vector<char> msg = wire::request(wire::Op::kWatch);
    wire::put_string(msg, key);
    send_request(msg, "watch", "'" + key + "'");
    read_reply("watch", "'" + key + "'", timeout_);
}

void TCPStore::set_string(const std::string& key, const std::string& value) {
    set(key, std::vector<char>(value.begin(), value.end()));
}

std::string TCPStore::get_string(const std::string& key) {
    std::vector<char> v = get(key);
    return std::string(v.begin(), v.end());
}

}  // namespace ampgrad::dist
