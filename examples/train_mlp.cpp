// train_mlp.cpp: the README's main job until the models issue lands. Placeholder: replaced below.
#include <ampgrad/ampgrad.h>
int main() { return 0; }
