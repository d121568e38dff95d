int f06(void) { return 6; }
