// dist/store.hpp: the key-value store that processes rendezvous through, hosted by rank 0 over TCP.
// Like PyTorch's TCPStore (torch/csrc/distributed/c10d/TCPStore.cpp): rank 0 runs a small server
// thread; every rank (rank 0 included) is a client. Operations: set, get (waits for the key),
// wait (for several keys), add (an atomic counter), check. Every blocking call has a timeout and
// its StoreError names the key, the operation and the timeout. Thread-safe (one request at a time). dist/gloo_group.cpp adapts it to
// Gloo's gloo::rendezvous::Store interface.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ampgrad::dist {

using Millis = std::chrono::milliseconds;

class TCPStoreServer;   // dist/store_server.cpp

class TCPStore {
public:
    // is_server: this process hosts the store (listens on host:port; port 0 picks a free port).
    // Clients retry connecting until `timeout` (the master may start later than its workers).
    TCPStore(std::string host, int port, bool is_server, Millis timeout);
    ~TCPStore();
    TCPStore(const TCPStore&) = delete;
    TCPStore& operator=(const TCPStore&) = delete;

    void set(const std::string& key, const std::vector<char>& value);
    std::vector<char> get(const std::string& key);                    // waits up to timeout()
    std::vector<char> get(const std::string& key, Millis timeout);
    void wait(const std::vector<std::string>& keys);
    void wait(const std::vector<std::string>& keys, Millis timeout);
    int64_t add(const std::string& key, int64_t delta);               // returns the new value
    bool check(const std::vector<std::string>& keys);                 // all present, without waiting
    // The server sets `key` when this client's connection closes (the process died or exited);
    // renewed on every reconnect. The process group watches "<group>/gone/<rank>".
    void set_on_disconnect(const std::string& key);

    void set_string(const std::string& key, const std::string& value);
    std::string get_string(const std::string& key);

    bool connected();                         // the connection is up (a call would not have to reconnect)
    int port() const { return port_; }        // the real port (useful with port 0)
    const std::string& host() const { return host_; }
    Millis timeout() const { return timeout_; }
    void set_timeout(Millis t) { timeout_ = t; }

private:
    void connect_to_server();
    void send_request(const std::vector<char>& msg, const char* op, const std::string& key);
    std::vector<char> read_reply(const char* op, const std::string& key, Millis timeout);
    void drop_connection();

    std::string host_;
    int port_;
    Millis timeout_;
    std::recursive_mutex mutex_;   // one request at a time on the connection (any thread may call)
    int fd_ = -1;
    std::string on_disconnect_key_;
    std::unique_ptr<TCPStoreServer> server_;
};

}  // namespace ampgrad::dist
