// threads.cpp: set_num_threads / get_num_threads over OpenMP (1 thread without OpenMP).
#include "core/threads.hpp"

#include <algorithm>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ampgrad {

void set_num_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(std::max(n, 1));
#else
    (void)n;
#endif
}

int get_num_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

}  // namespace ampgrad
