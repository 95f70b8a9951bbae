// tools/ampgrad_run.cpp: `ampgrad-run`, the process launcher for ampgrad::dist (like torchrun).
//
//   ampgrad-run --nproc-per-node N [--nnodes M|MIN:MAX --node-rank K --master-addr A --master-port P]
//               [--max-restarts R --monitor-interval S --rdzv-timeout S --rdzv-port P] prog args...
//   ampgrad-run --help
//
// Starts N copies of prog on this node with the rendezvous environment that dist::init_process_group
// reads: RANK = K*N + LOCAL_RANK, WORLD_SIZE = M*N, LOCAL_WORLD_SIZE = N, MASTER_ADDR,
// MASTER_PORT (and OMP_NUM_THREADS=1 unless set, as torchrun does). Each line a rank prints is
// prefixed with "[rank R] " (stdout to stdout, stderr to stderr). SIGINT and SIGTERM are forwarded
// to every rank. When a rank fails (non-zero exit or a signal), the others get SIGTERM (SIGKILL
// after 5 s), and ampgrad-run exits with the failed rank's code (128 + signal for a signal).
// With --max-restarts R (or --nnodes MIN:MAX) the launchers of all hosts instead meet again through
// a store on node 0 (tools/restart_rounds.hpp) and start their ranks once more, up to R times, with
// AMPGRAD_RESTART_COUNT and AMPGRAD_RESTART_CAUSE set (`ampgrad train --resume auto` continues from
// the newest checkpoint); a run whose ranks fail at the same step in two rounds in a row stops.
// With MIN:MAX, a round goes on with the hosts that came back within --rdzv-timeout (at least MIN):
// ranks are renumbered over them. See docs/distributed.md, "When a rank fails".
// Under srun, SLURM_NNODES, SLURM_NODEID (or SLURM_PROCID) and the first host of SLURM_JOB_NODELIST
// stand in for --nnodes, --node-rank and --master-addr when those are not given.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "launcher.hpp"

using ampgrad_run::Options;
using ampgrad_run::RoundEnv;
using ampgrad_run::RoundResult;

namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
    char c = static_cast<char>(sig);
    (void)!write(g_signal_pipe[1], &c, 1);
}

const char* const kUsage =
    "usage: ampgrad-run [--nproc-per-node N] [--nnodes M --node-rank K --master-addr A --master-port P] prog [args...]\n"
    "\n"
    "Starts N copies of prog on this node with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
    "MASTER_ADDR and MASTER_PORT set for ampgrad::dist (OMP_NUM_THREADS=1 unless set).\n"
    "\n"
    "  --nproc-per-node N   processes on this node (default 1)\n"
    "  --nnodes M           nodes, one ampgrad-run on each (default 1, or SLURM_NNODES); MIN:MAX: elastic,\n"
    "                       a restart round goes on with the hosts that rejoin (at least MIN)\n"
    "  --node-rank K        this node's index in [0, M) (default 0, or SLURM_NODEID)\n"
    "  --master-addr A      address of node 0, which hosts the store (default 127.0.0.1, or the first\n"
    "                       host of SLURM_JOB_NODELIST)\n"
    "  --master-port P      the store's TCP port on node 0 (default 29500)\n"
    "  --collective-timeout S  a collective running longer fails on every rank, and every rank writes its\n"
    "                       flight recorder (sets AMPGRAD_COLLECTIVE_TIMEOUT for ampgrad train; default 60)\n"
    "  --flight-recorder-dir D  where ranks write flight_recorder_rank<R>.json (sets AMPGRAD_FR_DIR);\n"
    "                       read them with `ampgrad fr D`\n"
    "  --max-restarts R     when a rank fails, stop this host's ranks, meet the other hosts again and start\n"
    "                       them again, up to R times (default 0: the run ends); the ranks see\n"
    "                       AMPGRAD_RESTART_COUNT and AMPGRAD_RESTART_CAUSE (use `ampgrad train --resume auto`)\n"
    "  --monitor-interval S how often, in seconds, to look for a failure on another host (default 1)\n"
    "  --rdzv-timeout S     how long node 0 waits for the hosts to join a round (default 30)\n"
    "  --rdzv-port P        the launchers' store on node 0, for restarts (default: master port + 1)\n"
    "  --standalone         accepted for torchrun's command lines: one node is the default here\n"
    "  --help               this text\n"
    "\n"
    "As torchrun, every flag may also be spelt with underscores (--nproc_per_node, --max_restarts).\n"
    "Under srun (one ampgrad-run task per node) the Slurm variables fill in the flags not given.\n"
    "Each output line is prefixed with \"[rank R] \". When a rank fails, the others are stopped and\n"
    "ampgrad-run exits with its code. See docs/distributed.md.\n";

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr, "ampgrad-run: %s\n%s", why, kUsage);
    std::exit(2);
}

int parse_int(const char* flag, const char* v) {
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (!*v || *end) usage((std::string(flag) + " needs an integer, got '" + v + "'").c_str());
    return static_cast<int>(x);
}

// A number of seconds > 0 ("0.5", "2").
double parse_seconds(const char* flag, const char* v) {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (!*v || *end || !(x > 0)) usage((std::string(flag) + " needs a number of seconds > 0, got '" + v + "'").c_str());
    return x;
}

// --nnodes M, or MIN:MAX (elastic: o.nnodes is MAX).
void parse_nnodes(Options& o, const std::string& value) {
    const size_t colon = value.find(':');
    o.nnodes = parse_int("--nnodes", value.substr(colon == std::string::npos ? 0 : colon + 1).c_str());
    o.min_nnodes = colon == std::string::npos ? o.nnodes : parse_int("--nnodes", value.substr(0, colon).c_str());
    if (o.min_nnodes < 1 || o.min_nnodes > o.nnodes)
        usage(("--nnodes " + value + ": MIN must be at least 1 and at most MAX").c_str());
}

struct Given {
    bool nnodes = false, node_rank = false, master_addr = false;
};

const char* env_or_null(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
}

// The first host of a Slurm node list: "gpu[07-09,12],cpu1" -> "gpu07"; "a,b" -> "a".
std::string first_slurm_host(const std::string& list) {
    const size_t bracket = list.find('['), comma = list.find(',');
    if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) return list.substr(0, comma);
    const size_t end = list.find_first_of(",-]", bracket + 1);
    return list.substr(0, bracket) + list.substr(bracket + 1, end - bracket - 1);
}

// Under srun, the Slurm variables fill in the flags that were not given, as torchrun users expect:
// one ampgrad-run task per node (srun --ntasks-per-node=1), node 0 the first host of the job.
void apply_slurm(Options& o, const Given& given) {
    const char* nnodes = env_or_null("SLURM_NNODES");
    const char* node_id = env_or_null("SLURM_NODEID");
    const char* proc_id = env_or_null("SLURM_PROCID");
    const char* ntasks = env_or_null("SLURM_NTASKS");
    const char* nodelist = env_or_null("SLURM_JOB_NODELIST");
    if (nnodes == nullptr && proc_id == nullptr) return;
    if (!given.nnodes && nnodes != nullptr) o.nnodes = o.min_nnodes = parse_int("SLURM_NNODES", nnodes);
    if (!given.node_rank && (node_id != nullptr || proc_id != nullptr))
        o.node_rank = parse_int(node_id != nullptr ? "SLURM_NODEID" : "SLURM_PROCID", node_id != nullptr ? node_id : proc_id);
    if (!given.master_addr && nodelist != nullptr) o.master_addr = first_slurm_host(nodelist);
    if (!given.nnodes && ntasks != nullptr && parse_int("SLURM_NTASKS", ntasks) != o.nnodes)
        usage((std::string("under srun, run one ampgrad-run per node (srun --ntasks-per-node=1): SLURM_NTASKS=") +
               ntasks + " but SLURM_NNODES=" + std::to_string(o.nnodes)).c_str());
}

Options parse(int argc, char** argv) {
    Options o;
    Given given;
    int i = 1;
    for (; i < argc && std::strncmp(argv[i], "--", 2) == 0; ++i) {
        std::string flag = argv[i];
        std::string value;
        if (flag == "--help" || flag == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        std::replace(flag.begin(), flag.begin() + static_cast<std::ptrdiff_t>(std::min(flag.find('='), flag.size())),
                     '_', '-');                          // torchrun's --max_restarts is --max-restarts
        if (flag == "--standalone") continue;            // torchrun's single-node rendezvous: ours by default
        if (auto eq = flag.find('='); eq != std::string::npos) {
            value = flag.substr(eq + 1);
            flag = flag.substr(0, eq);
        } else if (flag == "--") {
            ++i;
            break;
        } else {
            if (i + 1 >= argc) usage((flag + " needs a value").c_str());
            value = argv[++i];
        }
        if (flag == "--nproc-per-node") o.nproc_per_node = parse_int("--nproc-per-node", value.c_str());
        else if (flag == "--nnodes") parse_nnodes(o, value), given.nnodes = true;
        else if (flag == "--node-rank") o.node_rank = parse_int("--node-rank", value.c_str()), given.node_rank = true;
        else if (flag == "--master-addr") o.master_addr = value, given.master_addr = true;
        else if (flag == "--master-port") o.master_port = parse_int("--master-port", value.c_str());
        else if (flag == "--collective-timeout") {
            o.collective_timeout_s = parse_int("--collective-timeout", value.c_str());
            if (o.collective_timeout_s < 1) usage("--collective-timeout must be at least 1 second");
        }
        else if (flag == "--flight-recorder-dir") o.fr_dir = value;
        else if (flag == "--max-restarts") o.max_restarts = parse_int("--max-restarts", value.c_str());
        else if (flag == "--monitor-interval") o.monitor_interval_s = parse_seconds("--monitor-interval", value.c_str());
        else if (flag == "--rdzv-timeout") o.rdzv_timeout_s = parse_int("--rdzv-timeout", value.c_str());
        else if (flag == "--rdzv-port") o.rdzv_port = parse_int("--rdzv-port", value.c_str());
        else usage(("unknown option " + flag).c_str());
    }
    for (; i < argc; ++i) o.command.push_back(argv[i]);
    apply_slurm(o, given);
    if (o.command.empty()) usage("no program to run");
    if (o.nproc_per_node < 1 || o.nnodes < 1) usage("--nproc-per-node and --nnodes must be at least 1");
    if (o.node_rank < 0 || o.node_rank >= o.nnodes) usage("--node-rank must be in [0, --nnodes)");
    if (o.max_restarts < 0) usage("--max-restarts must be at least 0");
    if (o.rdzv_timeout_s < 1) usage("--rdzv-timeout must be at least 1 second");
    if (o.rdzv_port == 0) o.rdzv_port = o.master_port + 1;
    return o;
}

}  // namespace

// Whether `name` can be executed: a path, or a name found on PATH (as execvp searches).
bool runnable(const std::string& name) {
    if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t at = 0; at <= dirs.size();) {
        const size_t end = std::min(dirs.find(':', at), dirs.size());
        const std::string dir = end > at ? dirs.substr(at, end - at) : ".";
        if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
        at = end + 1;
    }
    return false;
}

// The program to start, checked before any rank starts. `ampgrad` that is not on PATH is taken from
// the build folder this launcher is in (build/tools/ampgrad-run -> build/app/ampgrad), saying so;
// anything else that cannot run is an error naming it, with the fix.
void resolve_program(Options& o) {
    std::string& program = o.command[0];
    if (runnable(program)) return;
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (program == "ampgrad" && n > 0) {
        std::string dir(self, static_cast<size_t>(n));
        dir = dir.substr(0, dir.rfind('/'));
        const std::string sibling = dir + "/../app/ampgrad";
        if (access(sibling.c_str(), X_OK) == 0) {
            std::fprintf(stderr, "ampgrad-run: ampgrad is not on PATH; running %s (the build folder's)\n", sibling.c_str());
            program = sibling;
            return;
        }
    }
    std::fprintf(stderr, "ampgrad-run: cannot run %s: %s; give its path (e.g. build/app/ampgrad), or put its folder on "
                 "PATH (export PATH=$PWD/build/app:$PATH)\n", program.c_str(),
                 program.find('/') != std::string::npos ? "not an executable file" : "not found on PATH");
    std::exit(2);
}

namespace {

// A folder for the ranks' step files, removed when the launcher ends.
struct StepDir {
    std::string path;
    StepDir() {
        std::string templ = (std::filesystem::temp_directory_path() / "ampgrad-run.XXXXXX").string();
        if (mkdtemp(templ.data()) == nullptr) { std::perror("ampgrad-run: mkdtemp"); std::exit(1); }
        path = templ;
    }
    ~StepDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

// A rank that exited with a code while other hosts take part is usually a survivor that failed on
// a lost peer (a SIGKILLed rank elsewhere), whose launcher reports the real cause within its next
// look at its ranks: wait up to a second for such a report before reporting this one as the round's
// cause. A rank killed by a signal, or a lone host, reports at once.
void report_local_failure(ampgrad_run::RestartRounds& rounds, int round, const ampgrad_run::Failure& failure,
                          size_t hosts) {
    constexpr auto kSurvivorGrace = std::chrono::milliseconds(1000);
    const auto deadline = std::chrono::steady_clock::now() + kSurvivorGrace;
    if (failure.exited && hosts > 1)
        while (!rounds.failed_elsewhere(round) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rounds.report_failure(round, failure);
}

// --max-restarts or --nnodes MIN:MAX: rounds of ranks, each after a rendezvous of the hosts, until
// one succeeds, the restarts run out, or the ranks fail at the same step twice in a row.
int run_with_restarts(const Options& o) {
    ampgrad_run::RestartRounds rounds({o.master_addr, o.rdzv_port, o.node_rank, o.min_nnodes, o.nnodes,
                                       std::chrono::milliseconds(1000LL * o.rdzv_timeout_s)});
    StepDir step_dir;
    std::string cause;             // why the previous round ended
    int64_t last_failed_step = -1;
    const int first_round = rounds.first_round();   // 0, or later for a launcher started again
    for (int round = first_round;; ++round) {
        const ampgrad_run::Membership m = rounds.join(round);
        RoundEnv env{static_cast<int>(m.nodes.size()) * o.nproc_per_node, m.index, {}};
        env.extra = {{"AMPGRAD_RESTART_COUNT", std::to_string(round)}, {"AMPGRAD_MAX_RESTARTS", std::to_string(o.max_restarts)},
                     {"AMPGRAD_RESTART_CAUSE", cause}};
        if (round > 0 || static_cast<int>(m.nodes.size()) < o.nnodes)
            std::fprintf(stderr, "ampgrad-run: round %d: %zu host(s), world size %d%s%s\n", round, m.nodes.size(),
                         env.world_size, cause.empty() ? "" : "; restarting after: ", cause.c_str());
        const RoundResult r = ampgrad_run::run_round(o, env, &rounds, round, step_dir.path, g_signal_pipe[0]);
        if (r.end == RoundResult::End::kSuccess) {
            rounds.finished(round);
            if (o.node_rank == 0) rounds.wait_until_finished(round, m);
            return 0;
        }
        if (r.end == RoundResult::End::kSignal || r.end == RoundResult::End::kStoreLost) return r.code;
        if (r.end == RoundResult::End::kLocalFailure) report_local_failure(rounds, round, r.failure, m.nodes.size());
        const ampgrad_run::Failure f = rounds.failure_of(round);
        if (round - first_round >= o.max_restarts) {
            std::fprintf(stderr, "ampgrad-run: %s; no restarts left (--max-restarts %d)\n", f.cause.c_str(), o.max_restarts);
            return r.code;
        }
        if (f.step >= 0 && f.step == last_failed_step) {
            std::fprintf(stderr, "ampgrad-run: %s, the step at which the previous round failed too; stopping rather "
                         "than restarting into the same failure\n", f.cause.c_str());
            return r.code;
        }
        last_failed_step = f.step;
        cause = f.cause;
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    resolve_program(o);
    if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return 1;
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    if (o.max_restarts == 0 && o.min_nnodes == o.nnodes)   // one round, no store: a failure ends the run
        return ampgrad_run::run_round(o, RoundEnv{o.nnodes * o.nproc_per_node, o.node_rank, {}}, nullptr, 0, "",
                                      g_signal_pipe[0]).code;
    try {
        return run_with_restarts(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ampgrad-run: %s\n", e.what());
        return 1;
    }
}
