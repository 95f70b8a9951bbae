// tools/restart_rounds.cpp: the launchers' rendezvous across restart rounds (tools/restart_rounds.hpp).
#include "restart_rounds.hpp"

#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "dist/error.hpp"
#include "dist/store.hpp"

namespace ampgrad_run {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string key(int round, const std::string& name) { return fmt::format("rdzv/{}/{}", round, name); }

// "0,2" -> {0, 2}
std::vector<int> parse_nodes(const std::string& text) {
    std::vector<int> nodes;
    for (size_t at = 0; at < text.size();) {
        const size_t end = std::min(text.find(',', at), text.size());
        nodes.push_back(std::stoi(text.substr(at, end - at)));
        at = end + 1;
    }
    return nodes;
}

}  // namespace

RestartRounds::RestartRounds(const RoundConfig& config) : config_(config) {
    // The store's own timeout bounds every wait: a round's close comes within join_timeout.
    const milliseconds timeout = config.join_timeout + milliseconds(30000);
    try {
        store_ = std::make_unique<ampgrad::dist::TCPStore>(config.host, config.port, config.node_rank == 0, timeout);
    } catch (const ampgrad::dist::StoreError& e) {
        throw std::runtime_error(fmt::format("the launchers' store at {}:{} (--rdzv-port): {}", config.host, config.port,
                                             e.what()));
    }
}

RestartRounds::~RestartRounds() = default;

int RestartRounds::first_round() {
    if (config_.node_rank == 0 || !store_->check({"rdzv/round"})) return 0;
    return std::stoi(store_->get_string("rdzv/round"));
}

Membership RestartRounds::join(int round) {
    if (config_.node_rank == 0) store_->set_string("rdzv/round", std::to_string(round));
    store_->set_string(key(round, fmt::format("node/{}", config_.node_rank)), "1");
    store_->add(key(round, "count"), 1);
    if (config_.node_rank == 0) return close_round(round);
    const std::string text = store_->get_string(key(round, "members"));
    if (!text.empty() && text[0] == '!') throw std::runtime_error(text.substr(1));
    Membership m;
    m.nodes = parse_nodes(text);
    for (size_t i = 0; i < m.nodes.size(); ++i)
        if (m.nodes[i] == config_.node_rank) m.index = static_cast<int>(i);
    if (m.index < 0)
        throw std::runtime_error(fmt::format("host {} joined restart round {} after node 0 closed it with hosts {} "
                                             "(--rdzv-timeout {} s)", config_.node_rank, round, text,
                                             config_.join_timeout.count() / 1000));
    return m;
}

// Node 0 waits for every host (--nnodes MAX), or, after the timeout, goes on with those that came
// when they are at least MIN.
Membership RestartRounds::close_round(int round) {
    const auto deadline = Clock::now() + config_.join_timeout;
    while (store_->add(key(round, "count"), 0) < config_.max_nodes && Clock::now() < deadline)
        std::this_thread::sleep_for(milliseconds(50));
    Membership m;
    for (int node = 0; node < config_.max_nodes; ++node)
        if (store_->check({key(round, fmt::format("node/{}", node))})) m.nodes.push_back(node);
    m.index = 0;
    std::string text;
    for (int node : m.nodes) {
        if (!text.empty()) text += ',';
        text += std::to_string(node);
    }
    if (static_cast<int>(m.nodes.size()) < config_.min_nodes) {
        const std::string why = fmt::format("restart round {}: only {} of at least {} hosts (--nnodes) joined within "
                                            "--rdzv-timeout {} s: hosts {}", round, m.nodes.size(), config_.min_nodes,
                                            config_.join_timeout.count() / 1000, text);
        store_->set_string(key(round, "members"), "!" + why);
        throw std::runtime_error(why);
    }
    store_->set_string(key(round, "members"), text);
    return m;
}

bool RestartRounds::failed_elsewhere(int round) { return store_->check({key(round, "failed")}); }

void RestartRounds::report_failure(int round, const Failure& failure) {
    if (store_->add(key(round, "failures"), 1) != 1) return;   // another host's failure came first
    store_->set_string(key(round, "cause"), failure.cause);
    store_->set_string(key(round, "step"), std::to_string(failure.step));
    store_->set_string(key(round, "failed"), "1");
}

Failure RestartRounds::failure_of(int round) {
    store_->wait({key(round, "failed")});
    return {store_->get_string(key(round, "cause")), std::stoll(store_->get_string(key(round, "step")))};
}

void RestartRounds::finished(int round) { store_->add(key(round, "finished"), 1); }

void RestartRounds::wait_until_finished(int round, const Membership& m) {
    const auto deadline = Clock::now() + config_.join_timeout;
    while (store_->add(key(round, "finished"), 0) < static_cast<int64_t>(m.nodes.size()) && Clock::now() < deadline &&
           !failed_elsewhere(round))
        std::this_thread::sleep_for(milliseconds(50));
}

}  // namespace ampgrad_run
