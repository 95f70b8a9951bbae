// dist/staged_group.cpp: tensors on any device through a backend that reads one (dist/staged_group.hpp).
#include "dist/staged_group.hpp"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::dist {

namespace {

// A caller's tensor and the copy at home that the collective writes.
struct CopyBack {
    Tensor caller;
    Tensor home;
};

// An async collective's handle: the backend's, then the results copied back, once.
class StagedWork : public Work {
public:
    StagedWork(WorkPtr inner, std::vector<CopyBack> copies) : inner_(std::move(inner)), copies_(std::move(copies)) {}
    bool is_completed() override { return inner_->is_completed(); }
    void wait(std::optional<Millis> timeout) override {
        inner_->wait(timeout);
        for (CopyBack& c : copies_) c.caller.copy_(c.home.to(c.caller.device()));
        copies_.clear();   // a second wait() copies nothing again
    }

private:
    WorkPtr inner_;
    std::vector<CopyBack> copies_;
};

class StagedGroup : public ProcessGroup {
public:
    StagedGroup(std::unique_ptr<ProcessGroup> inner, Device home) : inner_(std::move(inner)), home_(home) {}

    int rank() const override { return inner_->rank(); }
    int world_size() const override { return inner_->world_size(); }
    const std::string& name() const override { return inner_->name(); }
    std::string backend() const override { return inner_->backend(); }
    Millis timeout() const override { return inner_->timeout(); }
    void abort(const std::string& reason) override { inner_->abort(reason); }

    WorkPtr all_reduce(Tensor& t, ReduceOp op, bool async_op) override {
        Tensor at_home = to_home("all_reduce", t);
        return finish(inner_->all_reduce(at_home, op, async_op), {{t, at_home}}, async_op);
    }
    WorkPtr reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op, bool async_op) override {
        Tensor out = space_at_home("reduce_scatter", output), in = to_home("reduce_scatter", input);
        return finish(inner_->reduce_scatter(out, in, op, async_op), {{output, out}}, async_op);
    }
    WorkPtr all_gather(Tensor& output, const Tensor& input, bool async_op) override {
        Tensor out = space_at_home("all_gather", output), in = to_home("all_gather", input);
        return finish(inner_->all_gather(out, in, async_op), {{output, out}}, async_op);
    }
    WorkPtr broadcast(Tensor& t, int src, bool async_op) override {
        Tensor at_home = to_home("broadcast", t);
        return finish(inner_->broadcast(at_home, src, async_op), {{t, at_home}}, async_op);
    }
    WorkPtr barrier(bool async_op) override { return inner_->barrier(async_op); }
    WorkPtr send_recv(const Tensor& send, int dst, Tensor& recv, int src, bool async_op) override {
        Tensor out = to_home("send_recv", send), in = space_at_home("send_recv", recv);
        return finish(inner_->send_recv(out, dst, in, src, async_op), {{recv, in}}, async_op);
    }

private:
    // The copy at home of a tensor the collective reads (or the tensor itself, at home).
    Tensor to_home(const char* op, const Tensor& t) const { return at_home(op, t, /*copy_values=*/true); }
    // Room at home for a tensor the collective only writes (its old values are not copied there).
    Tensor space_at_home(const char* op, const Tensor& t) const { return at_home(op, t, /*copy_values=*/false); }

    Tensor at_home(const char* op, const Tensor& t, bool copy_values) const {
        if (t.device() == home_) return t;
        if (!t.is_contiguous()) throw ValueError(fmt::format("{}: needs a contiguous tensor, got {}", op, t.describe()));
        return copy_values ? t.to(home_) : empty(t.sizes(), TensorOptions().dtype(t.dtype()).device(home_));
    }

    // The pairs whose caller's tensor is not at home need a copy back: after a synchronous
    // collective at once, after an async one in its wait().
    WorkPtr finish(WorkPtr work, std::vector<CopyBack> pairs, bool async_op) const {
        std::vector<CopyBack> copies;
        for (CopyBack& p : pairs)
            if (!(p.caller.device() == home_)) copies.push_back(std::move(p));
        if (copies.empty()) return work;
        auto staged = std::make_shared<StagedWork>(std::move(work), std::move(copies));
        if (!async_op) staged->wait(std::nullopt);
        return staged;
    }

    std::unique_ptr<ProcessGroup> inner_;
    Device home_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_staged_group(std::unique_ptr<ProcessGroup> inner, Device home) {
    return std::make_unique<StagedGroup>(std::move(inner), home);
}

}  // namespace ampgrad::dist
