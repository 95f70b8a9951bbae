// backend_cuda.hpp: the CUDA implementation of core/backend.hpp, one instance per GPU. Each
// kernel family lives in its own file with the same name as in cpu/: copy.cu, elementwise.cu,
// gemm.cu (cuBLAS), random.cu, amp.cu. Kernels not written yet throw DeviceError (backend.cu).
// Plain C++ (no CUDA types), so .cpp files may include it too.
#pragma once
#include "core/backend.hpp"
#include "core/cuda_info.hpp"

namespace ampgrad::cuda {

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int index) : index_(index) {}
    DeviceType device_type() const override { return kCUDA; }
    int index() const { return index_; }

    void copy(const Tensor& dst, const Tensor& src) override;
    void fill(const Tensor& dst, double value) override;
    void unary(UnaryOp op, const Tensor& out, const Tensor& in) override;
    void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) override;
    void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double scalar, bool scalar_first) override;
    void add_scaled(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) override;
    void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) override;
    void clamp(const Tensor& out, const Tensor& in, std::optional<double> lo, std::optional<double> hi) override;
    void activation_backward(ActivationGrad op, const Tensor& dx, const Tensor& x, const Tensor& dy) override;
    void reduce(ReduceOp op, const Tensor& out, const Tensor& in, std::span<const int64_t> dims) override;
    void max_with_indices(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) override;
    void gemm(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, double alpha,
              double beta) override;
    void softmax(const Tensor& y, const Tensor& x, bool log) override;
    void softmax_backward(const Tensor& dx, const Tensor& y, const Tensor& dy, bool log) override;
    void layer_norm(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                    const Tensor& bias, double eps) override;
    void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                             const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) override;
    void embedding(const Tensor& out, const Tensor& idx, const Tensor& weight) override;
    void embedding_backward(const Tensor& dweight, const Tensor& idx, const Tensor& dout) override;
    void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                       int64_t ignore_index) override;
    void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits, const Tensor& lse,
                                const Tensor& targets, int64_t ignore_index) override;
    void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) override;
    void random_normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) override;
    void non_finite_check_and_unscale(std::span<Tensor> grads, const Tensor& found_inf,
                                      const Tensor& inv_scale) override;
    void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                      double growth_factor, double backoff_factor, int64_t growth_interval, double min_scale,
                      double max_scale) override;

private:
    int index_;
};

// The backend core/backend.cpp calls, and the allocator registered for kCUDA (allocator.cu); both
// throw DeviceError when cuda:<index> is unusable.
Backend& cuda_backend(int index);
Allocator& cuda_allocator(int index);

// Throws DeviceError unless `index` names a usable GPU: "cuda:0: no CUDA device is available (...)"
// or "cuda:3: device index out of range (2 devices)".
void require_device(int index);

// Throws DeviceError unless every tensor lives on cuda:<index> (kernels never read host memory).
void require_on_device(const char* kernel, int index, std::initializer_list<const Tensor*> ts);

[[noreturn]] void throw_bad_dtype(const char* kernel, DType dtype, const char* expected);

}  // namespace ampgrad::cuda
