// view_history.cpp: CopySlices and AsStrided nodes, and the view bookkeeping around them (see
// view_history.hpp for the idea). Their backward formulas cut a window out of a gradient
// (window_gather) or paste one into zeros (window_scatter); each is the other's backward, so
// double backward works through in-place writes into views.
#include "autograd/view_history.hpp"

#include "autograd/anomaly_mode.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "kernels/kernels.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {

// Where a view sits inside its (contiguous) base, so the same window can be cut from a gradient.
struct Window {
    Shape sizes;
    Shape strides;
    int64_t offset = 0;                // in elements, relative to the base's first element
    Tensor cut(const Tensor& contiguous_base_shaped) const {
        return make_view(contiguous_base_shaped, sizes, strides, contiguous_base_shaped.storage_offset() + offset);
    }
};

Window window_of(const Tensor& view, const Tensor& base) {
    return {view.sizes(), view.strides(), view.storage_offset() - base.storage_offset()};
}

Tensor window_scatter(const Tensor& g, const Window& window, const Shape& base_shape);

// The window of t (base shape) as a contiguous tensor (view shape). Differentiable: its backward
// is window_scatter, whose backward is this again, so create_graph works through both.
Tensor window_gather(const Tensor& t, const Window& window) {
    Tensor src = t.contiguous();                                   // (base shape)
    Tensor out = make_empty(window.sizes, src.dtype(), src.device());   // (view shape)
    kernels::copy(out, window.cut(src));
    Shape base_shape = src.sizes();
    return record("window_gather", out, {src}, {}, [window, base_shape](BackwardContext&, const tensor_list& g) {
        return tensor_list{window_scatter(g[0], window, base_shape)};
    });
}

// Zeros of the base's shape with g (view shape) in the window.
Tensor window_scatter(const Tensor& g, const Window& window, const Shape& base_shape) {
    Tensor out = make_empty(base_shape, g.dtype(), g.device());   // (base shape)
    kernels::fill(out, 0.0);
    kernels::copy(window.cut(out), g);
    return record("window_scatter", out, {g}, {}, [window](BackwardContext&, const tensor_list& gg) {
        return tensor_list{window_gather(gg[0], window)};
    });
}

// True outside the window: (base shape) bool
Tensor outside_window(const Window& window, const Shape& base_shape, Device device) {
    Tensor mask = make_empty(base_shape, kBool, device);
    kernels::fill(mask, 1.0);
    kernels::fill(window.cut(mask), 0.0);
    return mask;
}

std::shared_ptr<Node> make_node(std::string_view op, edge_list edges, std::vector<TensorMeta> inputs,
                                TensorMeta output, BackwardFn fn) {
    auto node = std::make_shared<FunctionNode>(op, std::move(edges), std::vector<SavedVariable>{}, std::move(fn));
    node->input_meta = std::move(inputs);
    node->output_meta = {std::move(output)};
    if (anomaly_mode_enabled()) node->creation_trace = capture_creation_trace();
    return node;
}

// base_new = base_old with `window` replaced by result. Gradient: (g outside the window, g inside it).
// `where` rather than a subtraction, so an inf in the window cannot turn into NaN outside it.
std::shared_ptr<Node> make_copy_slices(const Tensor& base, const Window& window, const Tensor& result) {
    edge_list edges{gradient_edge(base), gradient_edge(result)};
    Shape base_shape = base.sizes();
    auto fn = [window, base_shape](BackwardContext& ctx, const tensor_list& g) -> tensor_list {
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) d[0] = where(outside_window(window, base_shape, g[0].device()), g[0], 0.0);
        if (ctx.needs_input_grad(1)) d[1] = window_gather(g[0], window);
        return d;
    };
    return make_node("copy_slices", std::move(edges), {TensorMeta::of(base), TensorMeta::of(result)},
                     TensorMeta::of(base), std::move(fn));
}

// view = base[window]. Gradient: zeros of the base's shape with g in the window.
std::shared_ptr<Node> make_as_strided(const Tensor& base, const Window& window, const TensorMeta& view_meta) {
    Shape base_shape = base.sizes();
    auto fn = [window, base_shape](BackwardContext&, const tensor_list& g) -> tensor_list {
        return {window_scatter(g[0], window, base_shape)};
    };
    return make_node("as_strided", {gradient_edge(base)}, {TensorMeta::of(base)}, view_meta, std::move(fn));
}

uint64_t generation_of(const Tensor& t) {
    const AutogradMeta* m = maybe_meta(t);
    return m ? m->history_generation : 0;
}

bool overlaps_itself(const Tensor& t) {
    for (size_t d = 0; d < t.sizes().size(); ++d)
        if (t.strides()[d] == 0 && t.sizes()[d] > 1) return true;
    return false;
}

}  // namespace

void mark_view(const Tensor& view, const Tensor& input) {
    const AutogradMeta* in = maybe_meta(input);
    const Tensor& base = in && in->view ? in->view->base : input;
    if (base.impl() == view.impl()) return;        // a no-op "view" returned its input: not a view
    auto info = std::make_unique<ViewInfo>();
    info->base = base;
    info->base_generation = generation_of(base);
    info->made_in_no_grad = !GradMode::is_enabled();
    meta_of(view).view = std::move(info);
}

void check_inplace_history(std::string_view op, const Tensor& self) {
    const AutogradMeta* m = maybe_meta(self);
    if (!m || !m->view) return;
    const Tensor& base = m->view->base;
    if (base.is_leaf() && base.requires_grad())
        throw AutogradError(fmt::format("{}: a view of a leaf Variable that requires grad is being used in an in-place "
                                        "operation. ({}; its base is {})", op, self.describe(), base.describe()));
    if (m->view->made_in_no_grad)
        throw AutogradError(fmt::format(
            "{}: A view was created in no_grad mode and is being modified inplace with grad mode enabled ({}). Given "
            "that this use case is ambiguous and error-prone, it is forbidden. Create the view and do the in-place "
            "op both inside the no_grad block or both outside it.", op, self.describe()));
    if (!base.is_contiguous())
        throw AutogradError(fmt::format("{}: in-place write with autograd into a view of a non-contiguous base is not "
                                        "supported ({}; base {}); call contiguous() on the base first", op,
                                        self.describe(), base.describe()));
    if (overlaps_itself(self))
        throw AutogradError(fmt::format("{}: unsupported operation: more than one element of the written-to tensor "
                                        "refers to a single memory location ({}); clone() it first", op,
                                        self.describe()));
}

void rebase_history(const Tensor& self, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
    set_history(self, fn, output_nr);
    ++meta_of(self).history_generation;
}

void rebase_history(const Tensor& self, const Tensor& result) {
    AutogradMeta* m = maybe_meta(self);
    if (!m || !m->view) return rebase_history(self, result.grad_fn(), result.output_nr());
    Tensor base = m->view->base;
    rebase_history(base, make_copy_slices(base, window_of(self, base), result), 0);
    refresh_view_history(self, *m);            // now: self = as_strided(CopySlices)
}

void refresh_view_history(const Tensor& view, AutogradMeta& m) {
    const Tensor& base = m.view->base;
    uint64_t generation = generation_of(base);
    if (generation == m.view->base_generation) return;
    m.view->base_generation = generation;
    if (!base.requires_grad()) return;
    set_history(view, make_as_strided(base, window_of(view, base), TensorMeta::of(view)), 0);
}

}  // namespace ampgrad::autograd
