// tools/restart_rounds.hpp: how the ampgrad-run launchers of a run (one per host) agree on each
// restart round, through a TCP store that node 0's launcher hosts for the whole run (on
// --rdzv-port, master port + 1 by default; dist/store.hpp). Like torchrun's elastic agent
// (torch/distributed/elastic/agent/server/api.py): every round is a rendezvous keyed by its number.
//
//   rdzv/round                 the round node 0 opened last (a launcher started late joins it)
//   rdzv/<r>/node/<k>          host k joined round r;  rdzv/<r>/count  how many did
//   rdzv/<r>/members           "0,1": node 0 closes the round when --nnodes MAX hosts joined, or
//                              after --rdzv-timeout with at least MIN ("!why" when too few came)
//   rdzv/<r>/failed            set once a host saw one of its ranks fail in round r; the first such
//                              host also writes rdzv/<r>/cause and rdzv/<r>/step (the step in
//                              progress, -1 unknown)
//   rdzv/<r>/finished          how many hosts' ranks all exited 0
//
// Node 0 must live through the run: it holds the store (torchrun's static c10d store has the same
// limit). Every error is a std::runtime_error whose message says what happened.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ampgrad::dist { class TCPStore; }

namespace ampgrad_run {

struct RoundConfig {
    std::string host;           // node 0's address (--master-addr)
    int port = 0;               // the agents' store port (--rdzv-port)
    int node_rank = 0;
    int min_nodes = 1, max_nodes = 1;
    std::chrono::milliseconds join_timeout{30000};   // --rdzv-timeout
};

// The hosts of one round, by node rank, ascending; `index` is this host's place (its GROUP_RANK).
struct Membership {
    std::vector<int> nodes;
    int index = -1;
};

// Why a round ended: the first failure any host reported.
struct Failure {
    std::string cause;     // "rank 1 (host 1) was killed by signal 9 at step 5"
    int64_t step = -1;     // the step in progress when it failed, -1 when unknown
    bool exited = false;   // the rank exited with a code (often a survivor of a lost peer), not by a signal
};

class RestartRounds {
public:
    explicit RestartRounds(const RoundConfig& config);   // node 0 starts the store; others connect
    ~RestartRounds();
    int first_round();                                   // 0, or the round a late launcher joins
    Membership join(int round);                          // the rendezvous of round `round`
    bool failed_elsewhere(int round);                    // some host reported a failure in the round
    void report_failure(int round, const Failure& failure);
    Failure failure_of(int round);                       // the round's first reported failure
    void finished(int round);                            // this host's ranks all exited 0
    void wait_until_finished(int round, const Membership& m);   // node 0: keeps the store up for the others

private:
    Membership close_round(int round);                   // node 0
    RoundConfig config_;
    std::unique_ptr<ampgrad::dist::TCPStore> store_;
};

}  // namespace ampgrad_run
