// tests/zero/zero_test.cpp: the ZeRO engine (zero/engine.hpp). In this process: the config
// parser's keys and errors, the flat layout and the owner-contiguous bucket packing, and (one-rank
// group) fp16/bf16 casting an f32 module or refusing it. With real processes over loopback
// (dist_worker running tests/zero/zero_scenarios.cpp): stages 0, 1, 2 and 3
// against single-process training with 1, 2 and 4 ranks, accumulation (also F_A F_B B_A B_B),
// checkpointing (with frozen parameters inside the checkpoint), a plain out.backward(grad), a
// backward inside a forward, and an fp16 overflow in one rank's partition.
#include "amp/loss_scaler.hpp"
#include "autograd/ops/ops.hpp"
#include "nn/linear.hpp"
#include "optim/sgd.hpp"
#include "tests/dist/spawn.hpp"
#include "tests/support/corrupt_inputs.hpp"
#include "tests/support/one_rank_group.hpp"
#include "zero/checkpoint.hpp"
#include "zero/config.hpp"
#include "zero/engine.hpp"
#include "zero/layout.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

using namespace ampgrad;
using namespace ampgrad_test;

TEST_CASE("zero config: DeepSpeed keys; an unknown key is an error naming it") {
    zero::ZeroConfig c = zero::parse_config(R"({
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
        "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8, "overlap_comm": false},
        "fp16": {"enabled": true, "loss_scale_window": 500, "hysteresis": 1, "min_loss_scale": 0.5},
        "bf16": {"enabled": false}})");
    CHECK(c.stage == 2);
    CHECK(c.reduce_bucket_size == 500000000);
    CHECK_FALSE(c.overlap_comm);
    CHECK(c.gradient_accumulation_steps == 2);
    CHECK(c.fp16);
    CHECK(c.loss_scale_window == 500);
    CHECK(c.hysteresis == 1);
    CHECK(c.min_loss_scale == 0.5);
    CHECK(c.gradient_clipping == 0.5);
    CHECK_THROWS_WITH_AS(zero::parse_config(R"({"zero_optimization": {"stgae": 2}})", "ds.json"),
                         doctest::Contains("ds.json: unknown key \"zero_optimization.stgae\""), ValueError);
    CHECK_THROWS_WITH_AS(zero::parse_config(R"({"optimizer": {}})"), doctest::Contains("unknown key \"optimizer\""),
                         ValueError);
    CHECK(zero::parse_config(R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 100}})")
              .stage3_prefetch_bucket_size == 100);
    CHECK(zero::parse_config(R"({"data_types": {"grad_accum_dtype": "fp16"}})").grad_accum_dtype == "fp16");
    CHECK_THROWS_WITH_AS(zero::parse_config(R"({"data_types": {"grad_accum_dtype": "fp8"}})"),
                         doctest::Contains("grad_accum_dtype is \"fp8\""), ValueError);
    CHECK_THROWS_WITH_AS(zero::parse_config(R"({"data_types": {"grad_accum_dtype": 16}})"),
                         doctest::Contains("not a string"), ValueError);
    CHECK_THROWS_WITH_AS(zero::parse_config(R"({"zero_optimization": {"stage": 4}})"),
                         doctest::Contains("expected 0 (data parallel), 1, 2 or 3"), ValueError);
    CHECK_THROWS_WITH_AS(zero::parse_config(R"({"gradient_accumulation_steps": 1.5})"),
                         doctest::Contains("not an integer"), ValueError);
    CHECK_THROWS_AS(zero::parse_config("{not json"), ValueError);
    // DeepSpeed's scheduling knobs load (type-checked, no effect); bf16.check_grad_overflow is read
    zero::ZeroConfig ds = zero::parse_config(R"({"steps_per_print": 10, "wall_clock_breakdown": false,
        "bf16": {"enabled": true, "check_grad_overflow": true},
        "zero_optimization": {"stage": 2, "contiguous_gradients": true, "reduce_scatter": true,
                              "allgather_partitions": true, "allgather_bucket_size": 5e8}})");
    CHECK(ds.stage == 2);
    CHECK(ds.bf16_check_grad_overflow);
    CHECK_FALSE(zero::ZeroConfig{}.bf16_check_grad_overflow);                 // DeepSpeed's default
    CHECK_THROWS_WITH_AS(zero::parse_config(R"({"zero_optimization": {"contiguous_gradients": 1}})"),
                         doctest::Contains("not a boolean"), ValueError);
}

namespace {

// Linear(4,3) in f32 with an f32 buffer: the module a user hands a DeepSpeed-style fp16/bf16 engine.
struct NetWithBuffer : nn::Module {
    NetWithBuffer() : nn::Module("NetWithBuffer") {
        fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
        register_buffer("running", ones({3}));
    }
    std::shared_ptr<nn::Linear> fc;
};

std::unique_ptr<optim::Optimizer> sgd(std::vector<Tensor> masters) {
    return std::make_unique<optim::SGD>(masters, optim::SGDOptions(0.1));
}

}  // namespace

// Issue 23: DeepSpeed's engine casts the module to the 16-bit dtype itself (deepspeed/runtime/engine.py,
// _cast_module_mixed_precision: parameters only, buffers keep their dtype); ours used to throw.
TEST_CASE("zero config: every corruption of a DeepSpeed JSON config is an ampgrad::Error naming it") {
    const std::string good = R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8}, "fp16": {"enabled": true, "hysteresis": 1}})";
    CHECK(ampgrad::testing::check_corruptions(ampgrad::testing::json_corruptions(good),
                                              [](const std::string& text) { zero::parse_config(text, "ds.json"); },
                                              "ds.json") > 40);
}

TEST_CASE("zero engine: fp16/bf16 cast an f32 module's parameters in place (buffers kept); or refuse") {
    ampgrad_test::OneRankGroup group;
    for (bool fp16 : {true, false}) {
        CAPTURE(fp16);
        for (int stage : {1, 2}) {
            CAPTURE(stage);
            manual_seed(3);
            auto net = std::make_shared<NetWithBuffer>();
            const TensorImpl* weight_impl = net->fc->weight.impl();
            std::vector<float> w32 = net->fc->weight.to_vector<float>();
            zero::ZeroConfig c;
            c.stage = stage;
            c.fp16 = fp16;
            c.bf16 = !fp16;
            zero::ZeroEngine engine(net, c, sgd, &group);
            const DType want = fp16 ? kFloat16 : kBFloat16;
            CHECK(net->fc->weight.dtype() == want);
            CHECK(net->fc->bias.dtype() == want);
            CHECK(net->fc->weight.impl() == weight_impl);            // the same tensor, cast in place
            CHECK(net->buffers()[0].dtype() == kFloat32);                   // buffers keep their dtype
            CHECK(net->fc->weight.to_vector<float>() == tensor<float>(w32).to(want).to_vector<float>());
            CHECK(engine.model_dtype() == want);
            Tensor x = randn({2, 4}).to(want);                              // (B,4)
            engine.backward(net->fc->forward(x).to(kFloat32).pow(2.0).mean());
            engine.step();
            CHECK(engine.was_step_applied());
            CHECK(net->fc->weight.dtype() == want);
        }
    }
    auto net = std::make_shared<NetWithBuffer>();
    zero::ZeroConfig refuse;
    refuse.fp16 = true;
    refuse.cast_module_dtype = false;
    CHECK_THROWS_WITH_AS(zero::ZeroEngine(net, refuse, sgd, &group),
                         doctest::Contains("fp16.enabled with cast_module_dtype = false needs f16 parameters, but "
                                           "'fc.weight' is f32"),
                         DTypeError);
    CHECK(net->fc->weight.dtype() == kFloat32);                             // refused: left alone
    net->to(kFloat16);
    zero::ZeroEngine engine(net, refuse, sgd, &group);                      // already f16: accepted
    CHECK(engine.model_dtype() == kFloat16);
}

TEST_CASE("zero engine: designated initialisers in API.md's order; engine.save_checkpoint / load_checkpoint") {
    ampgrad_test::OneRankGroup group;
    const zero::ZeroConfig c{.stage = 2, .reduce_bucket_size = 1000, .overlap_comm = false,
                             .gradient_accumulation_steps = 1, .fp16 = false, .gradient_clipping = 0.0};
    CHECK(c.stage == 2);
    manual_seed(5);
    auto net = std::make_shared<NetWithBuffer>();
    zero::ZeroEngine engine(net, c, sgd, &group);
    Tensor x = randn({2, 4});                                          // (B,4)
    engine.backward(net->fc->forward(x).pow(2.0).mean());
    engine.step();
    const std::vector<float> saved = net->fc->weight.to_vector<float>();
    const auto root = std::filesystem::temp_directory_path() / fmt::format("ampgrad_zero_methods_{}", ::getpid());
    const std::string dir = engine.save_checkpoint(root.string());    // DeepSpeed's default tag
    CHECK(std::filesystem::path(dir).filename() == "global_step1");
    engine.backward(net->fc->forward(x).pow(2.0).mean());
    engine.step();
    CHECK(net->fc->weight.to_vector<float>() != saved);
    zero::LoadResult loaded = engine.load_checkpoint(root.string());  // through `latest`
    CHECK(loaded.dir == dir);
    CHECK(net->fc->weight.to_vector<float>() == saved);
    CHECK(engine.global_steps() == 1);
    std::filesystem::remove_all(root);
}

TEST_CASE("zero bf16: an inf gradient skips the step only with check_grad_overflow, as DeepSpeed") {
    ampgrad_test::OneRankGroup group;
    for (bool check : {true, false}) {
        CAPTURE(check);
        manual_seed(8);
        auto net = std::make_shared<NetWithBuffer>();
        zero::ZeroConfig c{.stage = 2, .bf16 = true};
        c.bf16_check_grad_overflow = check;
        zero::ZeroEngine engine(net, c, sgd, &group);
        Tensor x = randn({2, 4}).to(kBFloat16);                              // (B,4)
        engine.backward(net->fc->forward(x).pow(2.0).mean() * std::numeric_limits<double>::infinity());
        engine.step();
        const bool finite = isfinite(net->fc->weight).all().item<bool>();
        CHECK(engine.skipped_steps() == (check ? 1 : 0));
        CHECK(finite == check);                                               // unchecked: the inf reaches the weights
    }
}

TEST_CASE("zero engine: DeepSpeed's needs_scaler, set_gradient_accumulation_boundary, global_samples, load by tag") {
    ampgrad_test::OneRankGroup group;
    manual_seed(6);
    auto net = std::make_shared<NetWithBuffer>();
    zero::ZeroEngine engine(net, zero::ZeroConfig{.stage = 1, .gradient_accumulation_steps = 2, .fp16 = true,
                                                  .train_micro_batch_size_per_gpu = 3},
                            sgd, &group);
    CHECK(engine.needs_scaler());
    CHECK_FALSE(engine.is_gradient_accumulation_boundary());          // micro-step 0 of 2
    engine.set_gradient_accumulation_boundary(true);                  // the caller decides
    CHECK(engine.is_gradient_accumulation_boundary());
    Tensor x = randn({3, 4}).to(kFloat16);                            // (B,4)
    engine.backward(net->fc->forward(x).pow(2.0).mean());
    engine.step();                                                    // a boundary: steps at micro-step 0
    CHECK(engine.global_steps() == 1);
    CHECK(engine.global_samples() == 6);                              // micro 3 x accumulation 2 x 1 rank
    engine.reset_gradient_accumulation_boundary();
    CHECK(engine.is_gradient_accumulation_boundary());                // (micro_steps 1 + 1) % 2 == 0
    const auto root = std::filesystem::temp_directory_path() / fmt::format("ampgrad_zero_tag_{}", ::getpid());
    engine.save_checkpoint(root.string(), "first");
    const std::vector<float> saved = net->fc->weight.to(kFloat32).to_vector<float>();
    engine.backward(net->fc->forward(x).pow(2.0).mean());
    engine.step();
    engine.save_checkpoint(root.string(), "second");                  // `latest` names "second"
    zero::LoadResult loaded = engine.load_checkpoint(root.string(), "first");
    CHECK(std::filesystem::path(loaded.dir).filename() == "first");
    CHECK(net->fc->weight.to(kFloat32).to_vector<float>() == saved);
    std::filesystem::remove_all(root);
    zero::ZeroEngine bf16(std::make_shared<NetWithBuffer>(), zero::ZeroConfig{.stage = 1, .bf16 = true}, sgd, &group);
    CHECK_FALSE(bf16.needs_scaler());
}

TEST_CASE("zero engine: no_sync() on the micro-steps of stages 0 and 1; refused in stages 2 and 3") {
    ampgrad_test::OneRankGroup group;
    for (int stage : {0, 1}) {
        CAPTURE(stage);
        auto run = [&](bool use_no_sync) {
            manual_seed(9);
            auto net = std::make_shared<NetWithBuffer>();
            zero::ZeroEngine engine(net, zero::ZeroConfig{.stage = stage, .gradient_accumulation_steps = 2}, sgd, &group);
            Tensor x = randn({2, 4});                                        // (B,4)
            {
                std::optional<zero::NoSyncGuard> quiet;
                if (use_no_sync) quiet.emplace(engine.no_sync());            // the first micro-step only
                engine.backward(net->fc->forward(x).pow(2.0).mean());
                engine.step();
            }
            engine.backward(net->fc->forward(x * 2.0).pow(2.0).mean());      // the boundary, outside it
            engine.step();
            return net->fc->weight.to_vector<float>();
        };
        CHECK(run(true) == run(false));                                       // nothing to skip before a boundary
        manual_seed(9);
        auto net = std::make_shared<NetWithBuffer>();
        zero::ZeroEngine engine(net, zero::ZeroConfig{.stage = stage}, sgd, &group);   // every step a boundary
        {
            zero::NoSyncGuard quiet = engine.no_sync();
            CHECK_THROWS_WITH_AS(static_cast<void>(engine.no_sync()), doctest::Contains("reentry is unsupported"), ValueError);
            engine.backward(net->fc->forward(randn({2, 4})).pow(2.0).mean());
            CHECK_THROWS_WITH_AS(engine.step(), doctest::Contains("ran inside no_sync()"), ValueError);
        }
        engine.backward(net->fc->forward(randn({2, 4})).pow(2.0).mean());    // reduces both; the step goes on
        engine.step();
        CHECK(engine.global_steps() == 1);
    }
    for (int stage : {2, 3}) {
        auto net = std::make_shared<NetWithBuffer>();
        zero::ZeroEngine engine(net, zero::ZeroConfig{.stage = stage}, sgd, &group);
        CHECK_THROWS_WITH_AS(static_cast<void>(engine.no_sync()), doctest::Contains("incompatible with gradient partitioning logic of ZeRO stage"),
                             ValueError);
    }
}

TEST_CASE("zero fp16 loss scaler: stage 0 is DeepSpeed's FP16_Optimizer (no hysteresis, no error at the minimum)") {
    ampgrad_test::OneRankGroup group;
    for (int stage : {0, 1}) {
        CAPTURE(stage);
        manual_seed(7);
        auto net = std::make_shared<NetWithBuffer>();
        zero::ZeroEngine engine(net, zero::ZeroConfig{.stage = stage, .fp16 = true, .initial_scale_power = 1}, sgd,
                                &group);
        auto* scaler = dynamic_cast<amp::DynamicLossScaler*>(engine.loss_scaler());
        REQUIRE(scaler != nullptr);
        Tensor x = randn({2, 4}).to(kFloat16);                        // (B,4)
        std::vector<double> scales;
        auto overflow_step = [&] {
            engine.backward(net->fc->forward(x).pow(2.0).mean() * std::numeric_limits<double>::infinity());
            engine.step();
            scales.push_back(scaler->cur_scale());
        };
        overflow_step();
        overflow_step();
        if (stage == 0) {                                             // halves at once, holds at min_scale 1
            overflow_step();
            CHECK(scales == std::vector<double>{1.0, 1.0, 1.0});
            CHECK(engine.skipped_steps() == 3);
        } else {                                                      // hysteresis 2: the first overflow keeps 2
            CHECK(scales == std::vector<double>{2.0, 1.0});
            CHECK_THROWS_WITH_AS(overflow_step(), doctest::Contains("Current loss scale already at minimum"),
                                 std::exception);
        }
    }
}

TEST_CASE("zero layout: contiguous partitions padded to the world size; owner-contiguous buckets") {
    zero::FlatLayout layout({6, 2, 6, 1}, 4);   // 15 elements, padded to 16, P = 4
    CHECK(layout.padded_numel() == 16);
    CHECK(layout.partition_numel() == 4);
    auto w1 = layout.pieces(0);                 // [0,6): rank 0 [0,4), rank 1 [4,6)
    REQUIRE(w1.size() == 2);
    CHECK((w1[1].rank == 1 && w1[1].param_offset == 4 && w1[1].numel == 2));
    auto w2 = layout.pieces(2);                 // [8,14): rank 2 [8,12), rank 3 [12,14)
    REQUIRE(w2.size() == 2);
    CHECK((w2[0].rank == 2 && w2[0].numel == 4 && w2[1].rank == 3 && w2[1].numel == 2));
    // Bucket {b2, w1}: rank 0 gets 4 elements, rank 1 gets 2, rank 3 gets 1: chunk 4.
    zero::BucketPacking b = zero::pack_bucket(layout, {3, 0});
    CHECK(b.chunk == 4);
    REQUIRE(b.pieces.size() == 3);
    CHECK((b.pieces[0].rank == 0 && b.buffer_offset[0] == 0));
    CHECK((b.pieces[1].rank == 1 && b.buffer_offset[1] == 4));
    CHECK((b.pieces[2].rank == 3 && b.pieces[2].param == 3 && b.buffer_offset[2] == 12));
    CHECK(zero::zero_paper_bytes(2, 1000, 4) == doctest::Approx(2000 + 14000 / 4.0));
}

TEST_CASE("zero stages 1 and 2 train like one process: 1, 2 and 4 ranks, tiny buckets, clipping; bytes per rank") {
    std::vector<std::string> bytes;
    for (int n : {1, 2, 4}) {
        auto results = run_passing("zero1_plain,zero2_plain", n);
        CHECK(line_after(results[0].output, "EPILOGUES") == "4");
        bytes.push_back(line_after(results[0].output, "BYTES"));   // stage 1: "params grads optimizer"
    }
    // Stage 1 keeps the whole flat f64 gradient, whose own slice is its partition (gradients in the
    // model's dtype); the masters and Adam's two moments are split W ways. 139 parameters, padded
    // to 139, 140, 140 (P = 139, 70, 35); optimizer = 3 * 8 * P bytes + Adam's 4-byte step counter.
    CHECK(bytes[0] == "1112 1112 3340");
    CHECK(bytes[1] == "1112 1120 1684");
    CHECK(bytes[2] == "1112 1120 844");
}

// Issue 23: stage 0 (DeepSpeed's plain data parallelism) behind the same engine API. The scenarios are
// stage 1's: the same single-process reference, accumulation, checkpointing (reentrant too), a plain
// out.backward(grad), a backward inside a forward, and fp16 with an overflow on the last rank only.
TEST_CASE("zero stage 0 trains like one process: 1, 2 and 3 ranks; nothing partitioned; fp16 overflow skips everywhere") {
    for (int n : {1, 2, 3}) {
        CAPTURE(n);
        auto results = run_passing("zero0_plain,zero0_accum,zero0_ckpt_reentrant,zero0_outgrad,zero0_fwdbwd", n);
        // Every rank keeps the whole f64 master, gradient and Adam state (139 parameters, no padding):
        // stage 1's bytes at one rank, at every world size.
        for (const auto& r : results) CHECK(line_after(r.output, "BYTES") == "1112 1112 3340");
    }
    run_passing("zero0_fp16,zero0_fp16acc", 2);
}

TEST_CASE("zero: accumulation, checkpointing, out.backward(grad), backward inside forward") {
    run_passing("zero1_accum,zero2_accum,zero1_ckpt,zero2_ckpt,zero1_ckpt_reentrant,zero2_ckpt_reentrant,"
                "zero1_outgrad,zero2_outgrad,zero2_fwdbwd",
                2);
}

TEST_CASE("zero fp16: an overflow in one rank's partition skips the step on every rank") {
    for (int n : {2, 4}) run_passing("zero1_fp16,zero2_fp16", n);
}

TEST_CASE("zero stage 3 trains like one process: 1, 2 and 4 ranks, tiny buckets, prefetch; bytes per rank") {
    std::vector<std::string> bytes;
    for (int n : {1, 2, 4}) {
        auto results = run_passing("zero3_plain", n);
        CHECK(line_after(results[0].output, "EPILOGUES") == "4");
        bytes.push_back(line_after(results[0].output, "BYTES"));
    }
    // Every parameter released after the step: params = this rank's f64 partition (8 * P); grads
    // = the f64 gradient partition + one 7-element bucket (56); optimizer as in stages 1 and 2.
    CHECK(bytes[0] == "1112 1168 3340");
    CHECK(bytes[1] == "560 616 1684");
    CHECK(bytes[2] == "280 336 844");
}

TEST_CASE("zero stage 3: accumulation (F_A F_B B_A B_B too), checkpointing with frozen parameters, out.backward(grad), "
          "a root parameter and a tied weight stay whole") {
    run_passing("zero3_accum,zero3_fabb,zero2_fabb,zero3_ckpt,zero3_ckpt_reentrant,zero3_frozen,zero3_frozen_reentrant,"
                "zero2_frozen,zero3_outgrad,zero3_fwdbwd,zero3_tied",
                2);
    run_passing("zero3_fabb,zero3_frozen,zero3_frozen_reentrant,zero3_tied", 4);
    run_passing("zero3_fabb,zero3_ckpt_reentrant,zero3_frozen,zero3_tied,zero3_outgrad", 1);
}

TEST_CASE("zero stage 3 through a module whose forward takes several tensors (x, cos, sin): its own parameter "
          "is gathered and released by its hooks, and training matches one process") {
    for (int n : {1, 2}) run_passing("zero3_multi_input", n);
}

TEST_CASE("zero stage 3 fp16: an overflow in one rank's partition skips the step on every rank") {
    for (int n : {2, 4}) run_passing("zero3_fp16", n);
}

TEST_CASE("zero fp16 with data_types.grad_accum_dtype fp16: 2-byte gradient partitions, same skip semantics") {
    auto results = run_passing("zero1_fp16acc,zero2_fp16acc,zero3_fp16acc", 2);
    // 139 f16 parameters, P = 70. Stage 1: the whole f16 gradient (140 * 2), its slice the partition;
    // stage 2: the f16 partition (70 * 2) + a 16-element f16 bucket (32); stage 3 as stage 2.
    std::string out = results[0].output;
    CHECK(contains(out, "BYTES 278 280 844"));
    CHECK(contains(out, "BYTES 278 172 844"));
    CHECK(contains(out, "BYTES 140 172 844"));
}
