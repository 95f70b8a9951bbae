// tools/launcher.hpp: the pieces of `ampgrad-run` (tools/ampgrad_run.cpp): its options, and one
// round of this host's ranks (tools/launcher_ranks.cpp): started with the rendezvous environment,
// their output pumped with "[rank R] " prefixes, the first failure stopping the others.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "restart_rounds.hpp"

namespace ampgrad_run {

struct Options {
    int nproc_per_node = 1, nnodes = 1, node_rank = 0, master_port = 29500;
    int min_nnodes = 1;             // --nnodes MIN:MAX (nnodes is MAX)
    int max_restarts = 0;           // restart rounds after the first (torchrun's --max-restarts)
    double monitor_interval_s = 1;  // how often a launcher looks for another host's failure
    int rdzv_timeout_s = 30;        // how long node 0 waits for hosts to join a round
    int rdzv_port = 0;              // the launchers' store (0: master port + 1)
    std::string master_addr = "127.0.0.1";
    int collective_timeout_s = 0;   // 0: the program's own (ampgrad train: 60 s)
    std::string fr_dir;             // "": the program's own (AMPGRAD_FR_DIR, else the temporary folder)
    std::vector<std::string> command;
};

// What a round gives its ranks beyond the options: the group they form, and what the launcher says.
struct RoundEnv {
    int world_size = 1, group_rank = 0;
    std::vector<std::pair<std::string, std::string>> extra;   // AMPGRAD_RESTART_COUNT, ...
};

// How one round of ranks ended.
struct RoundResult {
    enum class End { kSuccess, kLocalFailure, kFailedElsewhere, kSignal, kStoreLost } end = End::kSuccess;
    int code = 0;       // the launcher's exit code if the run ends here
    Failure failure;    // kLocalFailure: the first local rank that failed
};

// Starts this host's ranks of a round and pumps their output until they have all ended. The first
// failure (a rank's; or another host's, looked up in `rounds` every --monitor-interval; or a signal
// read from `signal_fd`, which is forwarded) stops the others: SIGTERM, then SIGKILL after 5 s.
// `rounds` null: no other hosts to watch. `step_dir` non-empty: rank R writes its step in progress
// to step_dir/rankR.step (AMPGRAD_STEP_FILE), and a failure names it.
RoundResult run_round(const Options& o, const RoundEnv& env, RestartRounds* rounds, int round,
                      const std::string& step_dir, int signal_fd);

}  // namespace ampgrad_run
