// module_list.hpp: nn::ModuleList, an indexable list of submodules registered as "0", "1", ...
// (so parameters are named "0.weight", "h.3.attn.c_attn.bias" when the list is registered as
// "h"). Unlike Sequential it has no forward: the owner decides how to call its modules, as
// PyTorch's nn.ModuleList.
//
//   auto blocks = register_module("h", std::make_shared<nn::ModuleList>());
//   for (int i = 0; i < n_layer; ++i) blocks->push_back(std::make_shared<Block>(cfg));
//   for (size_t i = 0; i < blocks->size(); ++i) x = blocks->at<Block>(i)->forward(x);
#pragma once
#include <memory>
#include <vector>

#include "nn/module.hpp"

namespace ampgrad::nn {

class ModuleList : public Module {
public:
    ModuleList() : Module("ModuleList") {}
    template <typename... M>
    explicit ModuleList(std::shared_ptr<M>... modules) : Module("ModuleList") {
        (push_back(std::move(modules)), ...);
    }

    // Appends a module (any Module subclass), named by its position.
    void push_back(std::shared_ptr<Module> module);
    void append(std::shared_ptr<Module> module) { push_back(std::move(module)); }
    void extend(const std::vector<std::shared_ptr<Module>>& modules);

    size_t size() const { return modules_.size(); }
    bool is_empty() const { return modules_.empty(); }
    const std::shared_ptr<Module>& operator[](size_t i) const { return ptr(i); }
    const std::shared_ptr<Module>& ptr(size_t i) const;   // IndexError when out of range
    // The i-th module as its concrete type; ValueError if it is not an M.
    template <typename M>
    std::shared_ptr<M> at(size_t i) const {
        auto typed = std::dynamic_pointer_cast<M>(ptr(i));
        if (!typed) throw_wrong_type(i);
        return typed;
    }
    std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
    std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

private:
    [[noreturn]] void throw_wrong_type(size_t i) const;

    std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace ampgrad::nn
