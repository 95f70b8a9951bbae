// cross_entropy.cpp: F.cross_entropy with all of PyTorch's options: class weights, label
// smoothing, reduction none/sum/mean, (N,C,*) inputs, and class-probability targets. The plain
// case (index targets, no weight, no smoothing, mean) goes to the fused kernel in loss.cpp, with
// (N,C,d1,..) logits moved to rows (N*d1*..,C) first; everything else is composed of differentiable ops (log_softmax, where, sum), so
// double backward works. Semantics follow PyTorch's LossNLL.cpp (cross_entropy_loss_label_smoothing,
// cross_entropy_loss_prob_target):
//   index targets:  nll_i = -w[t_i] logp[i, t_i],  smooth_i = -sum_c w_c logp[i, c]  (0 where t_i ignored)
//                   loss = (1 - eps) nll + (eps / C) smooth;  mean divides both by sum_i w[t_i]
//   prob targets:   loss_i = -sum_c w_c logp[i, c] ((1 - eps) p[i, c] + eps / C);  mean divides by N*
#include <cmath>

#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"

namespace ampgrad::nn::functional {

namespace {

constexpr const char* kOp = "cross_entropy";

// (C) -> (1,C,1,...) broadcasting against logits along class_dim
Tensor class_view(const Tensor& per_class, const Tensor& logits, int64_t class_dim) {
    Shape s(static_cast<size_t>(logits.dim()), 1);
    s[static_cast<size_t>(class_dim)] = per_class.numel();
    return per_class.view(s);
}

void check_options(const Tensor& logits, const CrossEntropyOptions& o, int64_t C) {
    if (!(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0))
        throw ValueError(fmt::format("{}: label_smoothing must be between 0.0 and 1.0. Got: {} (input is {})", kOp,
                                     o.label_smoothing, logits.describe()));
    if (!o.weight.defined()) return;
    ops::check_same_device(kOp, {&logits, &o.weight});
    if (o.weight.dim() != 1 || o.weight.numel() != C)
        throw ShapeError(fmt::format("{}: weight tensor should be defined either for all {} classes or no classes "
                                     "but got weight {} (input is {})", kOp, C, o.weight.describe(),
                                     logits.describe()));
    if (o.weight.dtype() != logits.dtype())
        throw DTypeError(fmt::format("{}: weight must have the input's dtype: weight is {}, input is {}", kOp,
                                     o.weight.describe(), logits.describe()));
}

// (N,C,d1,..) -> (N,d1,..): the shape index targets must have
Shape spatial_shape(const Tensor& logits) {
    Shape s = logits.sizes();
    s.erase(s.begin() + 1);
    return s;
}

// x with dim moved to the end, the others in order: (N,C,d1,..) -> (N,d1,..,C)
Tensor movedim_last(const Tensor& x, int64_t dim) {
    Shape order;
    for (int64_t d = 0; d < x.dim(); ++d)
        if (d != dim) order.push_back(d);
    order.push_back(dim);
    return permute(x, order);
}

Tensor reduce_loss(const Tensor& per_item, Reduction r, const Tensor& denom) {
    if (r == Reduction::kNone) return per_item;
    Tensor total = sum(per_item);
    return r == Reduction::kSum ? total : total / denom;
}

Tensor cross_entropy_prob_targets(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o,
                                  int64_t class_dim, int64_t C) {
    if (!is_floating(target.dtype()))
        throw DTypeError(fmt::format("{}: expected a floating target for class probabilities, got {} (input is {})",
                                     kOp, target.describe(), logits.describe()));
    if (o.ignore_index >= 0)
        throw ValueError(fmt::format("{}: ignore_index ({}) is not supported for probability targets", kOp,
                                     o.ignore_index));
    Tensor logp = log_softmax(logits, class_dim);                                          // (N,C,*)
    Tensor p = o.label_smoothing > 0.0 ? target * (1.0 - o.label_smoothing) + o.label_smoothing / C : target;
    Tensor terms = logp * p;
    if (o.weight.defined()) terms = terms * class_view(o.weight, logits, class_dim);
    Tensor per_item = -sum(terms, {class_dim});                                             // (N,*)
    double items = C == 0 ? 0.0 : static_cast<double>(logits.numel() / C);
    return reduce_loss(per_item, o.reduction, full({}, items, TensorOptions(per_item.dtype()).device(logits.device())));
}

// index targets (N,*) or (): validates the range with one host sync
void check_target_range(const Tensor& logits, const Tensor& target, int64_t ignore_index, int64_t C) {
    if (target.numel() == 0) return;
    NoGradGuard no_grad;
    Tensor ignored = eq(target, ops::wrapped_scalar(static_cast<double>(ignore_index), target));
    Tensor bad = (lt(target, zeros_like(target)) | ge(target, full_like(target, static_cast<double>(C)))) &
                 logical_not(ignored);
    if (sum(bad.to(kInt64)).item<int64_t>() == 0) return;
    Tensor first_bad = where(bad, target, ops::wrapped_scalar(0.0, target)).reshape({-1});
    int64_t value = 0;
    for (int64_t v : first_bad.to_vector<int64_t>()) if (v != 0) { value = v; break; }
    throw IndexError(fmt::format("{}: target {} is out of bounds for {} classes (input is {}, target is {})", kOp,
                                 value, C, logits.describe(), target.describe()));
}

Tensor cross_entropy_index_targets(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o,
                                   int64_t class_dim, int64_t C) {
    if (target.dtype() != kInt64)
        throw DTypeError(fmt::format("{}: class-index targets must be int64 but got {} (input is {})", kOp,
                                     target.describe(), logits.describe()));
    Shape want = logits.sizes();
    want.erase(want.begin() + class_dim);
    if (target.sizes() != want)
        throw ShapeError(fmt::format("{}: expected targets of shape {} for input {}, got {}", kOp, shape_str(want),
                                     logits.describe(), target.describe()));
    check_target_range(logits, target, o.ignore_index, C);
    Tensor logp = log_softmax(logits, class_dim);                                           // (N,C,*)
    Tensor valid = ne(target, ops::wrapped_scalar(static_cast<double>(o.ignore_index), target));   // (N,*)
    Tensor t = where(valid, target, ops::wrapped_scalar(0.0, target)).unsqueeze(class_dim);        // (N,1,*)
    Tensor classes = class_view(arange(C, TensorOptions(kInt64).device(logits.device())), logits, class_dim);
    Tensor onehot = eq(classes, t);                                                         // (N,C,*)
    Tensor picked = sum(where(onehot, logp, 0.0), {class_dim});                             // (N,*)
    // an ignored row's weight is 0 by selection, not by product (0 * a NaN class weight is NaN)
    Tensor w = valid.to(logits.dtype());                                                    // (N,*)
    if (o.weight.defined())
        w = where(valid, sum(where(onehot, expand(class_view(o.weight, logits, class_dim), logits.sizes()), 0.0),
                             {class_dim}), 0.0);
    Tensor nll = where(valid, -picked * w, 0.0);                                            // (N,*)
    Tensor denom = sum(w);                                                                  // ()
    Tensor loss = reduce_loss(nll, o.reduction, denom);
    if (o.label_smoothing <= 0.0) return loss;
    Tensor weighted = o.weight.defined() ? logp * class_view(o.weight, logits, class_dim) : logp;
    Tensor smooth = where(valid, -sum(weighted, {class_dim}), 0.0);                         // (N,*)
    return loss * (1.0 - o.label_smoothing) + reduce_loss(smooth, o.reduction, denom) * (o.label_smoothing / C);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets_in, const CrossEntropyOptions& options) {
    Tensor logits = logits_in, targets = targets_in;
    CrossEntropyOptions o = options;
    ops::check_defined(kOp, logits, "input");
    ops::check_defined(kOp, targets, "target");
    bool fused = !o.weight.defined() && o.label_smoothing == 0.0 && o.reduction == Reduction::kMean &&
                 targets.dtype() == kInt64 && targets.sizes() != logits.sizes();
    if (fused && (logits.dim() == 2 || logits.dim() == 1)) return cross_entropy(logits, targets, o.ignore_index);
    if (fused && logits.dim() > 2 && targets.sizes() == spatial_shape(logits)) {
        Tensor rows = reshape(movedim_last(logits, 1), {-1, logits.size(1)});                 // (N*d1*..,C)
        return cross_entropy(rows, reshape(targets, {-1}), o.ignore_index);                    // mean over the rows
    }
    if (is_floating(targets.dtype())) AMPGRAD_AUTOCAST("cross_entropy", &logits, &targets, &o.weight);
    else AMPGRAD_AUTOCAST("cross_entropy", &logits, &o.weight);
    ops::check_floating(kOp, logits);
    ops::check_same_device(kOp, {&logits, &targets});
    if (logits.dim() == 0)
        throw ShapeError(fmt::format("{}: input must have a class dimension, got {}", kOp, logits.describe()));
    const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
    const int64_t C = logits.size(class_dim);
    check_options(logits, o, C);
    if (logits.sizes() == targets.sizes()) return cross_entropy_prob_targets(logits, targets, o, class_dim, C);
    return cross_entropy_index_targets(logits, targets, o, class_dim, C);
}

}  // namespace ampgrad::nn::functional
