int f02(void) { return 2; }
