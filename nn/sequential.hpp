// sequential.hpp: nn::Sequential, a chain of modules each mapping Tensor -> Tensor, registered as
// "0", "1", ... (so parameters are named "0.weight", "2.bias"), and nn::Functional, which wraps a
// plain function (relu, gelu, a lambda) as a parameter-free module.
//
//   auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
//                                               std::make_shared<nn::Functional>(relu),
//                                               std::make_shared<nn::Linear>(8, 2));
//   Tensor y = net->forward(x);                     // (B,4) -> (B,2)
#pragma once
#include <functional>

#include "nn/module.hpp"

namespace ampgrad::nn {

class Functional : public Module {
public:
    explicit Functional(std::function<Tensor(const Tensor&)> fn) : Module("Functional"), fn_(std::move(fn)) {}
    Tensor forward(const Tensor& x) const { return fn_(x); }

private:
    std::function<Tensor(const Tensor&)> fn_;
};

class Sequential : public Module {
public:
    Sequential() : Module("Sequential") {}
    template <typename... M>
    explicit Sequential(std::shared_ptr<M>... modules) : Module("Sequential") {
        (push_back(std::move(modules)), ...);
    }

    // Appends a module that has `Tensor forward(const Tensor&)`, named by its position.
    template <typename M>
    void push_back(std::shared_ptr<M> module) {
        push_back(std::to_string(modules_.size()), std::move(module));
    }
    template <typename M>
    void push_back(const std::string& name, std::shared_ptr<M> module) {
        register_module(name, module);
        forwards_.push_back([module](const Tensor& x) { return module->forward(x); });
        modules_.push_back(std::move(module));
    }

    Tensor forward(const Tensor& x) const;   // modules applied in order
    size_t size() const { return modules_.size(); }
    const std::shared_ptr<Module>& operator[](size_t i) const { return ptr(i); }
    const std::shared_ptr<Module>& ptr(size_t i) const;   // IndexError when out of range
    // The i-th module as its concrete type; ValueError if it is not an M.
    template <typename M>
    std::shared_ptr<M> at(size_t i) const {
        auto typed = std::dynamic_pointer_cast<M>(ptr(i));
        if (!typed) throw_wrong_type(i);
        return typed;
    }

private:
    [[noreturn]] void throw_wrong_type(size_t i) const;

    std::vector<std::shared_ptr<Module>> modules_;
    std::vector<std::function<Tensor(const Tensor&)>> forwards_;
};

}  // namespace ampgrad::nn
