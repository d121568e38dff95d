int f09(void) { return 9; }
