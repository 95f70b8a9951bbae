// threads.hpp: the number of threads CPU kernels use (OpenMP; defaults to the number of cores, or
// OMP_NUM_THREADS when set).
#pragma once

namespace ampgrad {

void set_num_threads(int n);
int get_num_threads();

}  // namespace ampgrad
