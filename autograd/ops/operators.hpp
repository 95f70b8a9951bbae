// operators.hpp: the C++ operators on tensors (part of autograd/ops/ops.hpp, which includes it).
// Each is the named op of ops.hpp: a + b is add(a, b), a == b is eq(a, b), x += y is x.add_(y).
// A double operand is a libtorch wrapped number: it broadcasts like a 0-dim tensor and does not
// promote a tensor's dtype (an f16 x * 0.1 stays f16); comparisons return kBool.
#pragma once
#include "core/tensor.hpp"

namespace ampgrad {

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double s);
Tensor operator!=(const Tensor& a, double s);
Tensor operator<(const Tensor& a, double s);
Tensor operator<=(const Tensor& a, double s);
Tensor operator>(const Tensor& a, double s);
Tensor operator>=(const Tensor& a, double s);
Tensor operator==(double s, const Tensor& a);
Tensor operator!=(double s, const Tensor& a);
Tensor operator<(double s, const Tensor& a);
Tensor operator<=(double s, const Tensor& a);
Tensor operator>(double s, const Tensor& a);
Tensor operator>=(double s, const Tensor& a);
// compound assignment: in place, as libtorch's (x += y is x.add_(y))
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, double s);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, double s);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, double s);
Tensor& operator/=(Tensor& a, double s);   // a.mul_(1 / s) is not a / s: this is the exact division
Tensor operator&(const Tensor& a, const Tensor& b);   // logical and of bool tensors
Tensor operator|(const Tensor& a, const Tensor& b);   // logical or

}  // namespace ampgrad
