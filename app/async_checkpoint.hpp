// app/async_checkpoint.hpp: `ampgrad train --ckpt-async`: checkpoints written while training goes on.
//
// At the step boundary, save() copies the checkpoint's tensors to host memory (page-locked where
// they live on a GPU, so that the copy runs at full speed) and hands the copy to a background
// thread, which writes root/step-N through publish_checkpoint (app/checkpoint.hpp): the files into
// a temporary folder, the rename, then `latest`. So the step is blocked only for the copy, and a
// crash (SIGKILL included) at any moment of a background write leaves the previous checkpoint as
// `latest`, as with a synchronous save. At most one save is in flight: a save() that finds the
// previous one still writing waits for it (that wait counts as blocked time). wait() (and the
// destructor) wait for the save in flight, so the process does not exit in the middle of one.
// As torchtitan's async checkpointing (torch.distributed.checkpoint.async_save with pinned memory).
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

#include "app/checkpoint.hpp"

namespace ampgrad::app {

// The content with every tensor copied off the training state: CPU tensors copied with one memcpy
// each, device tensors into page-locked host memory. Where `staging` (the previous save's copy, no
// longer being written) has a tensor of the same name, dtype and sizes, it is reused.
CheckpointContent host_copy(const CheckpointContent& live, const CheckpointContent* staging = nullptr);

// How long saves held up training: count, total and longest, in milliseconds.
struct SaveBlockTimes {
    int64_t saves = 0;
    double total_ms = 0.0, max_ms = 0.0;
    void add(double ms);
    std::string describe(bool async) const;   // "3 checkpoint saves blocked the step 4.1 ms on average ..."
};

class AsyncCheckpointer {
public:
    AsyncCheckpointer();
    AsyncCheckpointer(const AsyncCheckpointer&) = delete;
    AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;
    ~AsyncCheckpointer();   // waits for the save in flight; a failure then is printed, not thrown

    // Waits for the previous save (rethrowing its failure), copies `live` to host memory and hands
    // it to the writer. Returns the milliseconds the caller was blocked.
    double save(const CheckpointContent& live, const std::string& root, int keep = 2);
    // Waits for the save in flight; its failure as an IOError naming the step.
    void wait();
    // The directory of the last save that completed ("" before the first).
    std::string last_saved();

private:
    struct Job {
        std::shared_ptr<CheckpointContent> content;
        std::string root;
        int keep = 2;
    };
    void writer_loop();

    std::mutex m_;
    std::condition_variable cv_;
    std::optional<Job> job_;        // the save handed to the writer, until it is written
    bool stop_ = false;
    std::exception_ptr error_;
    std::string last_saved_;
    std::shared_ptr<CheckpointContent> staging_;   // the last save's host copy, reused by the next
    // One writer for the run, started once and niced (+10), so that handing it a save costs a
    // notify and its work does not preempt the training thread on a busy machine.
    std::thread writer_;
};

}  // namespace ampgrad::app
