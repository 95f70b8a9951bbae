// app/async_checkpoint.hpp: `ampgrad train --ckpt-async`: checkpoints written while training goes on.
//
// A save has three phases, and the training thread waits only in the first and, rarely, at a fence:
//  1. save(), at the step boundary (training thread): waits for the previous save if it is still in
//     flight (at most one is), copies the small state the forward pass writes (the fp8 amax
//     histories and scales, "fp8.*") and records every other tensor's version; state.json's JSON
//     (step, RNG, sampler, LR, loss scaler) is already a value. Then (on a GPU, once the training
//     stream has finished the step's writes) it hands the live tensors over.
//  2. The copier thread copies the parameters and optimizer states to host memory (page-locked
//     where they live on a GPU) while the next forward and backward run: those only read them. The
//     first write to them in a step is the optimizer step, so Trainer::train_step calls the fence,
//     wait_for_copy(), right before it (Trainer::set_before_optimizer_step); its wait counts as
//     blocked time. The copier checks afterwards that no tensor's version moved during the copy, so
//     a write before the fence is an error, never a silently mixed checkpoint.
//  3. The writer thread (niced +10) writes root/step-N from the copy through publish_checkpoint
//     (app/checkpoint.hpp): the files into a temporary folder, the rename, then `latest`. A crash
//     (SIGKILL included) at any moment of a background save leaves the previous checkpoint as
//     `latest`, as with a synchronous save.
// wait() (and the destructor) wait for the save in flight, so the process does not exit in the
// middle of one. After torchtitan's async checkpointing (torch.distributed.checkpoint.async_save
// with pinned memory), with the copy itself taken off the step as well.
//
// Only rank 0 writes a data-parallel checkpoint (every rank holds the same state), so `latest`
// always names a whole checkpoint; ZeRO checkpoints, which every rank writes, are saved
// synchronously (--ckpt-async with --zero is refused).
#pragma once
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/checkpoint.hpp"

namespace ampgrad::app {

// The content with every tensor copied off the training state: CPU tensors copied with one memcpy
// each, device tensors into page-locked host memory. Where `staging` (the previous save's copy, no
// longer being written) has a tensor of the same name, dtype and sizes, it is reused.
CheckpointContent host_copy(const CheckpointContent& live, const CheckpointContent* staging = nullptr);

// How long saves held up training: count, total and longest (per save: the boundary and the
// fence together), in milliseconds; fence_ms is the part spent at the fence.
struct SaveBlockTimes {
    int64_t saves = 0;
    double total_ms = 0.0, max_ms = 0.0, fence_ms = 0.0;
    void add(double ms);             // a save's time at the step boundary
    void add_fence(double ms);       // the wait at the fence after the last save
    std::string describe(bool async) const;   // "3 checkpoint saves blocked the step 4.1 ms on average ..."

private:
    double last_ms_ = 0.0;
};

class AsyncCheckpointer {
public:
    AsyncCheckpointer();
    AsyncCheckpointer(const AsyncCheckpointer&) = delete;
    AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;
    ~AsyncCheckpointer();   // waits for the save in flight; a failure then is printed, not thrown

    // Phase 1 above: waits for the previous save (rethrowing its failure), copies the "fp8.*"
    // tensors, and hands `live` (views of the training state) to the copier. Returns the
    // milliseconds the caller was blocked. Nothing may write `live`'s tensors until wait_for_copy().
    double save(const CheckpointContent& live, const std::string& root, int keep = 2);
    // The fence: waits until the save in flight no longer reads the live state. Returns the
    // milliseconds waited (0 when the copy was done, or no save is in flight).
    double wait_for_copy();
    // Waits for the save in flight; its failure as an IOError naming the step.
    void wait();
    // The directory of the last save that completed ("" before the first).
    std::string last_saved();

private:
    struct Job {
        CheckpointContent live;                      // views of the training state (fp8.* already copies)
        std::vector<uint32_t> versions;              // each live tensor's version at the boundary
        std::shared_ptr<CheckpointContent> copy;     // the host copy, once made
        std::string root;
        int keep = 2;
    };
    void copier_loop();
    void writer_loop();
    void copy_job(Job& job);   // phase 2, on the copier thread

    std::mutex m_;
    std::condition_variable cv_;
    std::optional<Job> job_;        // the save in flight: copying while !job_->copy, then writing
    bool stop_ = false;
    std::exception_ptr error_;
    std::string last_saved_;
    std::shared_ptr<CheckpointContent> staging_;   // the last save's host copy, reused by the next (copier only)
    // Two threads for the run, each started once, so that handing over a save costs a notify: the
    // copier at the training thread's priority (the fence may wait for it), the writer niced (+10),
    // so that its work does not preempt the training thread on a busy machine.
    std::thread copier_;
    std::thread writer_;
};

}  // namespace ampgrad::app
