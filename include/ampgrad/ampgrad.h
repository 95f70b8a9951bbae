// ampgrad.h: the umbrella header. #include <ampgrad/ampgrad.h> and link with
// $(pkg-config --cflags --libs ampgrad), or depend on ampgrad_dep in a Meson build.
#pragma once
#include "autograd/anomaly_mode.hpp"
#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/saved_variable.hpp"
#include "core/backend.hpp"
#include "core/cuda_info.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"
#include "core/tensor.hpp"
