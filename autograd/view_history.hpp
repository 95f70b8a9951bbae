// view_history.hpp: in-place writes through views (docs/autograd.md §1, "In-place ops and views").
//
// A view shares memory with its base, so `base.narrow(0, 1, 2).mul_(w)` changes the base too, and
// the base's gradient must now flow through that multiply. As in PyTorch:
//   - the in-place op runs out of place on the view's value, and its result is written back;
//   - the base's history is rewritten onto a CopySlices node: its gradient goes to the base's old
//     history, except in the written region, whose gradient goes to the result's node;
//   - every view of that base (the written one included) regenerates its grad_fn lazily, as an
//     AsStrided node reading its region of the base's new gradient, the next time autograd asks
//     for it (a view compares its base's history_generation with the one it was made at).
// Errors as in PyTorch: writing with grad into a view of a leaf that requires grad, or into a
// view created under no_grad. Not supported (clear errors): bases that are not contiguous, and
// views that overlap themselves (expand). Both nodes support double backward.
#pragma once
#include <memory>
#include <string_view>

#include "autograd/autograd_meta.hpp"

namespace ampgrad::autograd {

// Called by every view op on its output: remembers the root base and the grad mode.
void mark_view(const Tensor& view, const Tensor& input);
// Throws the typed error if an in-place op with autograd history may not write into `self`.
void check_inplace_history(std::string_view op, const Tensor& self);
// After an in-place op wrote `result` into `self`: self (or, for a view, its base) now has
// result's history. Bumps the history generation so stale views regenerate.
void rebase_history(const Tensor& self, const Tensor& result);
// The non-view form, for a node made elsewhere (custom Function's mark_dirty).
void rebase_history(const Tensor& self, const std::shared_ptr<Node>& fn, uint32_t output_nr);
// Regenerates a view's grad_fn if its base's history changed since (accessors call it).
void refresh_view_history(const Tensor& view, AutogradMeta& m);

}  // namespace ampgrad::autograd
