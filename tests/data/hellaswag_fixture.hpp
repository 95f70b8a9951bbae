// hellaswag_fixture.hpp: a small file in HellaSwag's layout (rowanz/hellaswag's jsonl: one object a
// line, every field the real file has), written by the tests that need one (tests/data, tests/app).
// The first example is the one karpathy/llm.c's dev/data/hellaswag.py quotes; the others are made up
// in the same layout, with a blank line and a CRLF line end as a file may have them.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

namespace ampgrad::testing {

inline const char* kHellaswagFixture =
    R"({"ind": 24, "activity_label": "Roof shingle removal", "ctx_a": "A man is sitting on a roof.", "ctx_b": "he", "ctx": "A man is sitting on a roof. he", "split": "val", "split_type": "indomain", "label": 3, "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.", "is holding a rubik's cube.", "starts pulling up roofing on a roof."], "source_id": "activitynet~v_-JhWjGDPHMY"})" "\n"
    R"({"ind": 92, "activity_label": "Clean and jerk", "ctx_a": "A lady walks to a barbell. She bends down and grabs the pole.", "ctx_b": "the lady", "ctx": "A lady walks to a barbell. She bends down and grabs the pole. the lady", "split": "val", "split_type": "zeroshot", "label": 0, "endings": ["stands and lifts the weight over her head.", "swings and lands in her arms.", "pulls the barbell forward.", "pulls a rope attached to the barbell."], "source_id": "activitynet~v_-lJS58hyo1c"})" "\n"
    "\n"
    R"({"ind": 106, "activity_label": "Canoeing", "ctx_a": "Two women in a child are shown in a canoe while a man pulls the canoe while standing in the water, with other individuals visible in the background.", "ctx_b": "the child and a different man", "ctx": "Two women in a child are shown in a canoe while a man pulls the canoe while standing in the water, with other individuals visible in the background. the child and a different man", "split": "val", "split_type": "indomain", "label": 2, "endings": ["are then shown paddling down a river in a boat while a woman talks.", "are driving the canoe, they go down the river flowing side to side.", "sit in a canoe while the man paddles.", "walking go down the rapids, while the man in his helicopter almost falls and goes out of canoehood."], "source_id": "activitynet~v_-xQvJmC2jhk"})" "\r\n"
    R"({"ind": 114, "activity_label": "Making a cake", "ctx_a": "[header] How to bake a café crème cake [title] Preheat the oven to 180 °C.", "ctx_b": "", "ctx": "[header] How to bake a café crème cake [title] Preheat the oven to 180 °C.", "split": "val", "split_type": "zeroshot", "label": 1, "endings": ["[step] Put the cake in the freezer for 2 days.", "[step] Butter a 20 cm tin and line it with paper.", "[step] Eat the flour.", "[title] Sing to the oven."], "source_id": "wikihow~1"})" "\n"
    R"({"ind": 120, "activity_label": "Playing harmonica", "ctx_a": "A man plays a harmonica on a stage.", "ctx_b": "he", "ctx": "A man plays a harmonica on a stage. he", "split": "val", "split_type": "indomain", "label": "1", "endings": ["eats it.", "keeps playing while the crowd claps along to the tune.", "throws it at the crowd.", "swims."], "source_id": "activitynet~v_x"})" "\n";

// Five examples, on lines 1, 2, 4, 5 and 6 (line 3 is blank), labels 3, 0, 2, 1, 1.
inline constexpr int kHellaswagFixtureExamples = 5;

inline std::string write_hellaswag_fixture(const std::filesystem::path& dir, const std::string& name = "hellaswag.jsonl",
                                           const std::string& text = kHellaswagFixture) {
    const std::filesystem::path path = dir / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
}

}  // namespace ampgrad::testing
