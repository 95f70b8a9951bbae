// dist/ddp.cpp: DistributedDataParallel's construction: broadcast rank 0's state, then hand the
// parameters that require grad to the Reducer (dist/reducer.cpp), which does the rest.
#include "dist/ddp.hpp"

#include "autograd/grad_mode.hpp"

#include <fmt/format.h>

namespace ampgrad::dist {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options)
    : module_(std::move(module)), group_(options.process_group ? options.process_group : &default_group()) {
    if (!module_) throw ValueError("DistributedDataParallel: the module is null");
    if (!(options.bucket_cap_mb > 0))
        throw ValueError(fmt::format("DistributedDataParallel: bucket_cap_mb must be positive, got {}", options.bucket_cap_mb));
    broadcast_module_state(*module_, *group_, options.broadcast_buffers);
    std::vector<std::string> names;
    std::vector<Tensor> params;
    for (const auto& [name, p] : module_->named_parameters()) {
        if (!p.requires_grad()) continue;
        names.push_back(name);
        params.push_back(p);
    }
    if (params.empty()) throw ValueError("DistributedDataParallel: the module has no parameter that requires grad");
    auto cap_bytes = static_cast<int64_t>(options.bucket_cap_mb * 1024.0 * 1024.0);
    reducer_ = std::make_unique<Reducer>(std::move(names), std::move(params), *group_, std::max<int64_t>(cap_bytes, 1),
                                         options.find_unused_parameters);
}

// Every rank starts from rank 0's parameters and buffers (PyTorch's _sync_module_states).
void broadcast_module_state(nn::Module& module, ProcessGroup& group, bool buffers) {
    NoGradGuard no_grad;
    std::vector<Tensor> state = module.parameters();
    if (buffers)
        for (const Tensor& b : module.buffers()) state.push_back(b);
    for (const Tensor& t : state) {
        Tensor data = t.detach();
        if (data.is_contiguous()) {
            group.broadcast(data, 0, /*async_op=*/false);
        } else {
            Tensor copy = data.contiguous();
            group.broadcast(copy, 0, /*async_op=*/false);
            data.copy_(copy);
        }
    }
}

}  // namespace ampgrad::dist
