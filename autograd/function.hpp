// function.hpp: custom autograd functions, libtorch style. Write forward and backward as static
// functions of a struct; apply() runs forward without recording, then joins the graph with one
// node whose backward is yours.
//
//   struct MulConst : autograd::Function<MulConst> {
//       static tensor_list forward(AutogradContext* ctx, const Tensor& x, double c) {
//           ctx->saved_data["c"] = c;
//           return {x * c};
//       }
//       static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
//           return {grads[0] * ctx->saved_data["c"].toDouble(), Tensor()};   // one per forward arg
//       }
//   };
//   Tensor y = MulConst::apply(x, 2.0)[0];
//
// backward returns one gradient per forward argument (undefined for non-tensor arguments and
// where ctx->needs_input_grad(i) is false); a tensor_list argument counts once per tensor.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"

namespace ampgrad::autograd {

// libtorch's names in torch::autograd, for custom functions written fully qualified
using ampgrad::tensor_list;
using variable_list = tensor_list;
using Variable = Tensor;

// A value kept in ctx->saved_data: bool, int, double, string, Tensor, int list, or any object
// through custom() (libtorch's IValue, reduced to what a custom function needs).
class IValue {
public:
    IValue() = default;
    IValue(bool v) : v_(v) {}                                           // NOLINT
    template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
    IValue(I v) : v_(static_cast<int64_t>(v)) {}                        // NOLINT
    IValue(double v) : v_(v) {}                                         // NOLINT
    IValue(float v) : v_(static_cast<double>(v)) {}                     // NOLINT
    IValue(std::string v) : v_(std::move(v)) {}                         // NOLINT
    IValue(const char* v) : v_(std::string(v)) {}                       // NOLINT
    IValue(Tensor v) : v_(std::move(v)) {}                              // NOLINT
    IValue(std::vector<int64_t> v) : v_(std::move(v)) {}                // NOLINT
    template <typename T>
    static IValue custom(std::shared_ptr<T> object) {
        IValue v;
        v.v_ = std::shared_ptr<void>(std::move(object));
        return v;
    }

    bool isNone() const { return v_.index() == 0; }
    bool toBool() const { return get<bool>("bool"); }
    int64_t toInt() const { return get<int64_t>("int"); }
    double toDouble() const;                                            // ints convert
    const std::string& toStringRef() const { return get<std::string>("string"); }
    const Tensor& toTensor() const { return get<Tensor>("Tensor"); }
    const std::vector<int64_t>& toIntVector() const { return get<std::vector<int64_t>>("int list"); }
    template <typename T>
    std::shared_ptr<T> toCustom() const { return std::static_pointer_cast<T>(get<std::shared_ptr<void>>("custom")); }
    std::string_view type_name() const;

private:
    template <typename T>
    const T& get(std::string_view wanted) const {
        if (const T* p = std::get_if<T>(&v_)) return *p;
        throw_wrong_type(wanted);
    }
    [[noreturn]] void throw_wrong_type(std::string_view wanted) const;
    std::variant<std::monostate, bool, int64_t, double, std::string, Tensor, std::vector<int64_t>,
                 std::shared_ptr<void>> v_;
};

class CustomFunctionNode;

// What forward and backward share (libtorch's AutogradContext).
class AutogradContext {
public:
    std::unordered_map<std::string, IValue> saved_data;

    // Tensors backward needs: saved as SavedVariables (version-checked, freed after backward
    // unless retain_graph, and packed by saved-tensor hooks, so checkpointing sees them).
    void save_for_backward(tensor_list to_save);
    tensor_list get_saved_variables() const;
    // Inputs forward modified in place (they must also be returned as outputs).
    void mark_dirty(const tensor_list& inputs);
    // Outputs that get no gradient (e.g. an argmax returned next to the values).
    void mark_non_differentiable(const tensor_list& outputs);
    // true (default): undefined incoming gradients reach backward as zeros.
    void set_materialize_grads(bool value) { materialize_grads_ = value; }
    // Whether backward must produce the gradient of the i-th tensor input.
    bool needs_input_grad(size_t i) const;

private:
    friend class CustomFunctionNode;
    friend struct FunctionApply;
    tensor_list to_save_;
    std::vector<SavedVariable> saved_;
    std::unordered_set<const TensorImpl*> dirty_;
    std::unordered_set<const TensorImpl*> non_differentiable_;
    bool materialize_grads_ = true;
    Node* node_ = nullptr;               // the node that owns this context
};

using CustomBackwardFn = std::function<tensor_list(AutogradContext*, tensor_list)>;

// The node a custom function records. Its name is "<Name>Backward".
class CustomFunctionNode final : public Node {
public:
    CustomFunctionNode(std::string_view name, edge_list next_edges, std::vector<bool> is_tensor_arg,
                       CustomBackwardFn backward);
    tensor_list apply(tensor_list&& grad_outputs) override;
    void release_variables() override;
    size_t saved_bytes() const override;
    AutogradContext& ctx() { return ctx_; }

private:
    AutogradContext ctx_;
    std::vector<bool> is_tensor_arg_;    // per forward argument
    CustomBackwardFn backward_;
};

// The non-template half of apply(): makes the node (wired to the inputs only when grad mode is
// on and some input requires grad), then wraps the outputs and saves the variables.
struct FunctionApply {
    tensor_list inputs;                  // the tensor arguments, in order
    std::shared_ptr<CustomFunctionNode> node;
    bool recording = false;

    FunctionApply(std::string_view name, tensor_list inputs, std::vector<bool> is_tensor_arg, CustomBackwardFn bw);
    AutogradContext* ctx() { return &node->ctx(); }
    tensor_list finish(tensor_list outputs);
};

namespace detail {
std::string function_name(const char* mangled);    // "(anonymous namespace)::MyFn" -> "MyFn"

inline void collect_arg(tensor_list& tensors, std::vector<bool>& is_tensor, const Tensor& t) {
    tensors.push_back(t);
    is_tensor.push_back(true);
}
inline void collect_arg(tensor_list& tensors, std::vector<bool>& is_tensor, const tensor_list& ts) {
    for (const Tensor& t : ts) collect_arg(tensors, is_tensor, t);
}
template <typename A>
void collect_arg(tensor_list&, std::vector<bool>& is_tensor, const A&) {
    is_tensor.push_back(false);
}
}  // namespace detail

template <typename T>
struct Function {
    template <typename... Args>
    static auto apply(Args&&... args) {
        tensor_list tensors;
        std::vector<bool> is_tensor;
        (detail::collect_arg(tensors, is_tensor, args), ...);
        FunctionApply call(node_name(), std::move(tensors), std::move(is_tensor),
                           [](AutogradContext* ctx, tensor_list grads) { return T::backward(ctx, std::move(grads)); });
        using Result = decltype(T::forward(call.ctx(), std::forward<Args>(args)...));
        tensor_list outputs;
        {
            NoGradGuard no_grad;                 // forward records nothing itself
            ForwardRegionGuard in_forward;       // a backward() in here is not the user's
            if constexpr (std::is_same_v<std::decay_t<Result>, Tensor>)
                outputs = {T::forward(call.ctx(), std::forward<Args>(args)...)};
            else
                outputs = T::forward(call.ctx(), std::forward<Args>(args)...);
        }
        outputs = call.finish(std::move(outputs));
        if constexpr (std::is_same_v<std::decay_t<Result>, Tensor>) return outputs[0];
        else return outputs;
    }

private:
    // T::name if the struct declares one, else its (unqualified) type name.
    static std::string_view node_name() {
        static const std::string name = [] {
            if constexpr (requires { std::string(T::name); }) return std::string(T::name);
            else return detail::function_name(typeid(T).name());
        }();
        return name;
    }
};

}  // namespace ampgrad::autograd
