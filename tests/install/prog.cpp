// prog.cpp: a user program built outside the tree against an installed ampgrad, exactly as
// API.md promises: c++ -std=c++20 prog.cpp $(pkg-config --cflags --libs ampgrad)
// It checks one forward + backward: y = 3*x*x + x, so dy/dx = 6x + 1.
#include <ampgrad/ampgrad.h>

#include <cstdio>
#include <vector>

int main() {
    using namespace ampgrad;
    Tensor x = tensor<float>({1.0f, 2.0f, 3.0f}).requires_grad_(true);   // (3)
    Tensor y = x * x * 3.0 + x;                                            // (3)
    y.backward(ones_like(y));
    std::vector<float> dx = x.grad().to_vector<float>();
    for (size_t i = 0; i < dx.size(); ++i) {
        float expected = 6.0f * static_cast<float>(i + 1) + 1.0f;
        if (dx[i] != expected) {
            std::printf("installed ampgrad: wrong gradient dx[%zu] = %g, expected %g\n", i, dx[i], expected);
            return 1;
        }
    }
    std::printf("installed ampgrad %s works: dx = [%g, %g, %g]\n", "OK", dx[0], dx[1], dx[2]);
    return 0;
}
