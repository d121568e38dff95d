int f01(void) { return 1; }
