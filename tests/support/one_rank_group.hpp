// tests/support/one_rank_group.hpp: a dist::ProcessGroup of one rank in this process. Every
// collective of one rank is the identity, so an engine (zero::ZeroEngine, DDP) can be built and
// stepped in a plain doctest case, with no rendezvous and no second process.
#pragma once
#include "dist/process_group.hpp"

#include <memory>
#include <string>

namespace ampgrad_test {

class OneRankGroup : public ampgrad::dist::ProcessGroup {
public:
    int rank() const override { return 0; }
    int world_size() const override { return 1; }
    const std::string& name() const override { return name_; }
    std::string backend() const override { return "one-rank"; }
    ampgrad::dist::Millis timeout() const override { return ampgrad::dist::Millis(1000); }
    ampgrad::dist::WorkPtr all_reduce(ampgrad::Tensor&, ampgrad::dist::ReduceOp, bool) override { return done(); }
    ampgrad::dist::WorkPtr reduce_scatter(ampgrad::Tensor& out, const ampgrad::Tensor& in, ampgrad::dist::ReduceOp,
                                          bool) override {
        out.copy_(in);
        return done();
    }
    ampgrad::dist::WorkPtr all_gather(ampgrad::Tensor& out, const ampgrad::Tensor& in, bool) override {
        out.copy_(in);
        return done();
    }
    ampgrad::dist::WorkPtr broadcast(ampgrad::Tensor&, int, bool) override { return done(); }
    ampgrad::dist::WorkPtr barrier(bool) override { return done(); }

private:
    struct Done : ampgrad::dist::Work {
        bool is_completed() override { return true; }
        void wait(std::optional<ampgrad::dist::Millis>) override {}
    };
    static ampgrad::dist::WorkPtr done() { return std::make_shared<Done>(); }
    std::string name_ = "one-rank";
};

}  // namespace ampgrad_test
