// tests/dist/startup_test.cpp: fail-fast start-up (dist/startup_watch.hpp) and the address a rank
// advertises (dist/socket_address.hpp). A rank that fails during start-up publishes an abort
// through the store, and one that dies is marked gone by it; the others stop at once naming it and
// its host, long before their timeout (60 s here; the harness kills them after 30 s, which fails
// the test).
#include "dist/error.hpp"
#include "dist/process_group.hpp"
#include "dist/socket_address.hpp"
#include "dist/store.hpp"
#include "spawn.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

using namespace ampgrad_test;

TEST_CASE("dist: a rank that fails during start-up stops the others at once, naming it and its host") {
    // Rank 1 names an interface this host does not have: it fails before joining the group.
    // (Two ranks: a third that started after rank 0 left would find no store, and retry until its timeout.)
    auto results = run_workers("init", 2, free_port(),
                               {{0, {{"AMPGRAD_TEST_TIMEOUT_MS", "60000"}}},
                                {1, {{"AMPGRAD_TEST_TIMEOUT_MS", "60000"}, {"AMPGRAD_SOCKET_IFNAME", "nosuchif0"}}}},
                               std::chrono::seconds(30));
    CAPTURE(results[0].output);
    CAPTURE(results[1].output);
    CHECK(results[1].exit_code == 3);
    CHECK(contains(results[1].output, "AMPGRAD_SOCKET_IFNAME=nosuchif0: this host has no interface of that name"));
    CHECK(results[0].exit_code == 3);   // not killed by the harness at 30 s
    CHECK(contains(results[0].output, "stopped while waiting for all ranks to join, because rank 1 on host "));
    CHECK(contains(results[0].output, "(127.0.0.1) failed: init_process_group: AMPGRAD_SOCKET_IFNAME=nosuchif0"));
}

TEST_CASE("dist: a rank whose process dies during start-up stops the others within a second, naming it") {
    // This test plays rank 1: it joins rank 0's store as init_process_group does (claims its rank,
    // asks to be marked gone, publishes its host), then its connection closes as a killed process's would.
    using namespace ampgrad::dist;
    const int port = free_port();
    std::thread rank1([port] {
        TCPStore store("127.0.0.1", port, /*is_server=*/false, Millis(20000));
        store.add("rdzv/default/claims/1", 1);
        store.set_on_disconnect("rdzv/default/gone/1");
        store.set_string("rdzv/default/host/1", "node-b (10.0.0.2)");
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    });
    auto results = run_workers("init", 2, port, {{0, {{"AMPGRAD_TEST_TIMEOUT_MS", "60000"}}}}, std::chrono::seconds(30));
    rank1.join();
    CAPTURE(results[0].output);
    CHECK(results[0].exit_code == 3);   // not killed by the harness at 30 s
    CHECK(contains(results[0].output, "because rank 1 on host node-b (10.0.0.2) exited during start-up"));
}

namespace {

// Unsets the interface variables now and again at scope exit, so that a failed check cannot leave
// them set for the workers of later cases.
struct InterfaceVariablesCleared {
    InterfaceVariablesCleared() { clear(); }
    ~InterfaceVariablesCleared() { clear(); }
    static void clear() {
        unsetenv("GLOO_SOCKET_IFNAME");
        unsetenv("AMPGRAD_SOCKET_IFNAME");
    }
};

}  // namespace

TEST_CASE("dist: the advertised address is the one that routes to MASTER_ADDR, unless an interface is named") {
    using namespace ampgrad::dist;
    InterfaceVariablesCleared cleared;
    CHECK(route_source_address("127.0.0.1", 29500) == "127.0.0.1");
    SocketChoice routed = choose_socket("127.0.0.1", 29500);
    CHECK(routed.address == "127.0.0.1");
    CHECK(routed.iface.empty());
    CHECK(contains(routed.reason, "route to MASTER_ADDR 127.0.0.1"));
    CHECK(interface_address("lo", "GLOO_SOCKET_IFNAME") == "127.0.0.1");

    setenv("AMPGRAD_SOCKET_IFNAME", "lo", 1);
    CHECK(choose_socket("127.0.0.1", 29500).reason == "AMPGRAD_SOCKET_IFNAME=lo");
    setenv("GLOO_SOCKET_IFNAME", "nosuchif0", 1);   // GLOO_SOCKET_IFNAME wins, as in PyTorch
    try {
        choose_socket("127.0.0.1", 29500);
        FAIL("an unknown interface was accepted");
    } catch (const DistError& e) {
        CHECK(contains(e.what(), "GLOO_SOCKET_IFNAME=nosuchif0: this host has no interface of that name"));
        CHECK(contains(e.what(), "lo (127.0.0.1)"));   // the interfaces there are
    }
    InterfaceVariablesCleared::clear();
    CHECK_THROWS_AS(route_source_address("no-such-host.invalid", 29500), DistError);
}

// torch.distributed's env:// rule: with WORLD_SIZE > 1 a rank must be told its RANK. A default of 0
// had two such processes both claim rank 0, one failing to bind the store and the other waiting
// for the whole timeout.
TEST_CASE("dist: WORLD_SIZE above 1 without RANK is a ValueError naming RANK; one process needs nothing") {
    struct SavedEnv {
        std::string name;
        std::optional<std::string> value;
        explicit SavedEnv(std::string n) : name(std::move(n)) {
            if (const char* v = std::getenv(name.c_str())) value = v;
        }
        ~SavedEnv() { value ? ::setenv(name.c_str(), value->c_str(), 1) : ::unsetenv(name.c_str()); }
    };
    SavedEnv rank("RANK"), world("WORLD_SIZE"), slurm_rank("SLURM_PROCID"), slurm_tasks("SLURM_NTASKS");
    for (const char* name : {"RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"}) ::unsetenv(name);
    ampgrad::dist::RendezvousInfo one = ampgrad::dist::rendezvous_info_from_env();
    CHECK(one.rank == 0);
    CHECK(one.world_size == 1);
    ::setenv("WORLD_SIZE", "2", 1);
    CHECK_THROWS_WITH_AS(ampgrad::dist::rendezvous_info_from_env(), doctest::Contains("RANK expected, but not set"),
                         ampgrad::ValueError);
    ampgrad::dist::InitOptions given;
    given.rank = 1;
    CHECK(ampgrad::dist::rendezvous_info_from_env(given).rank == 1);
    ::setenv("RANK", "1", 1);
    CHECK(ampgrad::dist::rendezvous_info_from_env().rank == 1);
}
