// backward_epilogue.cpp: the once-per-user-backward epilogue (see backward_epilogue.hpp).
#include "autograd/backward_epilogue.hpp"

#include "autograd/engine.hpp"

#include <utility>

namespace ampgrad::autograd {

BackwardEpilogue::BackwardEpilogue(std::function<void()> begin, std::function<void()> end, bool ignore_backward_in_forward)
    : begin_(std::move(begin)), end_(std::move(end)), ignore_in_forward_(ignore_backward_in_forward) {}

bool BackwardEpilogue::on_hook() {
    if (ignore_in_forward_ && backward_called_from_forward()) return false;
    int64_t task = outermost_graph_task_id();
    if (task == task_id_) return true;
    // A new user backward (or an earlier one threw before its end ran: begin_ resets).
    begin_();
    task_id_ = task;
    queue_callback([this] {
        task_id_ = -1;   // first, so that an exception from end_ leaves a clean state
        ++runs_;
        end_();
    }, CallbackScope::kOutermost);
    return true;
}

}  // namespace ampgrad::autograd
