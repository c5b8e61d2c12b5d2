"""Every test in this folder needs a working CUDA device (marked ``gpu`` by the root
conftest) and compares the GPU path with the CPU reference on fresh random inputs."""
