int f15(void) { return 15; }
