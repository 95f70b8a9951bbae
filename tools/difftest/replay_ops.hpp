// replay_ops.hpp: the differential tester's op table (replay_ops.cpp): name + tensor args +
// keyword args -> outputs, one entry per op of autograd/ops/ops.hpp, mirrored by OPS in
// tools/difftest/torch_ops.py.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"

namespace ampgrad::difftest {

tensor_list run_op(const std::string& name, tensor_list args, const nlohmann::json& kw);

}  // namespace ampgrad::difftest
