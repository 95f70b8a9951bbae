// nf4_test.cpp: kernels/nf4.hpp's formulas: the 16 NF4 levels against bitsandbytes' table and against
// the QLoRA paper's construction (quantiles of N(0,1)), the encoder's nearest-level rule with its
// ties, the packing order, and the dynamic 8-bit map of the double quantisation
// (tests/fixtures/nf4/table.json, written by tools/fixtures/nf4.py).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "ampgrad/ampgrad.h"
#include "kernels/nf4.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using ampgrad::testing::load_fixture;

namespace {

// The standard normal's quantile function, by bisection on Phi(x) = erfc(-x / sqrt 2) / 2.
double normal_quantile(double p) {
    double lo = -12.0, hi = 12.0;
    for (int i = 0; i < 200; ++i) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return (lo + hi) / 2;
}

// QLoRA's NF4 (Dettmers et al. 2023, eq. 4 and appendix E; bitsandbytes' create_normal_map with
// offset 0.9677083): 8 positive quantiles of N(0,1) at p = offset .. 0.5 (9 points, last dropped),
// 7 negative ones from 8 points, and an exact zero; all divided by the largest.
std::vector<double> nf4_levels_from_quantiles() {
    const double offset = 0.9677083;
    std::vector<double> levels;
    for (int i = 0; i < 7; ++i) levels.push_back(-normal_quantile(offset + i * (0.5 - offset) / 7));
    levels.push_back(0.0);
    for (int i = 7; i >= 0; --i) levels.push_back(normal_quantile(offset + i * (0.5 - offset) / 8));
    const double largest = levels.back();
    for (double& v : levels) v /= largest;
    return levels;    // ascending: the negative quantiles came out largest magnitude first
}

}  // namespace

TEST_CASE("nf4: the 16 levels are bitsandbytes' table exactly") {
    const std::vector<float> expected = load_fixture("nf4/table").at("levels").to_vector<float>();
    REQUIRE(expected.size() == 16);
    for (int code = 0; code < 16; ++code) {
        CAPTURE(code);
        CHECK(nf4::level(code) == expected[static_cast<size_t>(code)]);
    }
}

TEST_CASE("nf4: the levels are the normalised quantiles of N(0,1) (the QLoRA construction)") {
    const std::vector<double> quantiles = nf4_levels_from_quantiles();
    REQUIRE(quantiles.size() == 16);
    for (int code = 0; code < 16; ++code) {
        CAPTURE(code);
        CHECK(std::fabs(nf4::level(code) - quantiles[static_cast<size_t>(code)]) < 2e-7);   // f32 rounding
    }
    CHECK(nf4::level(0) == -1.0f);
    CHECK(nf4::level(7) == 0.0f);
    CHECK(nf4::level(15) == 1.0f);
}

TEST_CASE("nf4: encode picks the nearest level, a tie going to the lower one") {
    for (int code = 0; code < 16; ++code) CHECK(nf4::encode(nf4::level(code)) == code);
    for (int code = 0; code < 15; ++code) {
        CAPTURE(code);
        const float midpoint = (nf4::level(code) + nf4::level(code + 1)) / 2.0f;
        CHECK(nf4::encode(midpoint) == code);                                          // tie: lower
        CHECK(nf4::encode(std::nextafter(midpoint, 2.0f)) == code + 1);
    }
    CHECK(nf4::encode(-1.0f) == 0);
    CHECK(nf4::encode(1.0f) == 15);
}

TEST_CASE("nf4: scaling into [-1, 1] multiplies by 1/absmax in a full block, divides in a tail, floors 0") {
    CHECK(nf4::scale_into_unit(3.0f, 3.0f, false) == 3.0f * (1.0f / 3.0f));
    CHECK(nf4::scale_into_unit(3.0f, 7.0f, true) == 3.0f / 7.0f);
    CHECK(nf4::scale_into_unit(0.0f, 0.0f, false) == 0.0f);                          // all-zero block
    CHECK(nf4::scale_into_unit(-5.0f, 2.0f, false) == -1.0f);                        // clamped
}

TEST_CASE("nf4: two codes a byte, the first element in the high nibble (bitsandbytes' order)") {
    CHECK(nf4::pack(0x3, 0xC) == 0x3C);
    CHECK(nf4::unpack(0x3C, 0) == 0x3);
    CHECK(nf4::unpack(0x3C, 1) == 0xC);
    CHECK(nf4::unpack(0x3C, 6) == 0x3);
}

TEST_CASE("nf4: the dynamic 8-bit map is bitsandbytes' create_dynamic_map() exactly") {
    const std::vector<float> expected = load_fixture("nf4/table").at("dynamic_map").to_vector<float>();
    REQUIRE(expected.size() == 256);
    for (int code = 0; code < 256; ++code) {
        CAPTURE(code);
        CHECK(nf4::dynamic_value(code) == expected[static_cast<size_t>(code)]);
    }
}

TEST_CASE("nf4: dynamic_encode is the nearest map value, a tie going to the lower code") {
    for (int code = 0; code < 256; ++code) CHECK(nf4::dynamic_encode(nf4::dynamic_value(code)) == code);
    for (int code = 0; code < 255; ++code) {
        CAPTURE(code);
        const float midpoint = (nf4::dynamic_value(code) + nf4::dynamic_value(code + 1)) / 2.0f;
        CHECK(nf4::dynamic_encode(midpoint) == code);
        CHECK(nf4::dynamic_encode(std::nextafter(midpoint, 2.0f)) == code + 1);
    }
}
