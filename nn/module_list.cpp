// module_list.cpp: nn::ModuleList's registration and checked indexing.
#include "nn/module_list.hpp"

#include "core/error.hpp"

namespace ampgrad::nn {

void ModuleList::push_back(std::shared_ptr<Module> module) {
    register_module(std::to_string(modules_.size()), module);   // ValueError if null
    modules_.push_back(std::move(module));
}

void ModuleList::extend(const std::vector<std::shared_ptr<Module>>& modules) {
    for (const auto& m : modules) push_back(m);
}

const std::shared_ptr<Module>& ModuleList::ptr(size_t i) const {
    if (i >= modules_.size())
        throw IndexError(fmt::format("ModuleList: index {} is out of range for {} modules", i, modules_.size()));
    return modules_[i];
}

void ModuleList::throw_wrong_type(size_t i) const {
    throw ValueError(fmt::format("ModuleList: module {} is a {}, not the type asked for", i, modules_[i]->name()));
}

}  // namespace ampgrad::nn
