// dist/store_server.hpp: the TCP store's server, run on a thread of rank 0 (see dist/store.hpp).
// One poll() loop serves every client; get and wait requests whose keys are missing are parked
// and answered when a set or add supplies the keys. A client may ask for a key to be set when its
// connection closes: that is how the other ranks learn which rank died (dist/gloo_group.cpp).
#pragma once
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace ampgrad::dist {

class TCPStoreServer {
public:
    // Listens on host:port (port 0: any free port). Throws StoreError naming the address on failure.
    TCPStoreServer(const std::string& host, int port);
    ~TCPStoreServer();
    int port() const { return port_; }

private:
    struct Client { int fd; std::vector<char> inbox; };
    struct Parked { int fd; std::vector<std::string> keys; bool is_get; };

    void loop();
    void accept_client();
    bool read_client(Client& c);                 // false: the client closed or sent garbage
    void handle(int fd, const std::vector<char>& payload);
    void answer_parked();
    void reply(int fd, const std::vector<char>& payload);
    bool has_all(const std::vector<std::string>& keys) const;

    int listen_fd_ = -1;
    int wake_pipe_[2] = {-1, -1};
    int port_ = 0;
    std::map<int, Client> clients_;
    std::vector<Parked> parked_;
    std::map<std::string, std::vector<char>> data_;
    std::map<int, std::string> on_close_;        // client fd -> key set when it disconnects
    std::thread thread_;
};

}  // namespace ampgrad::dist
