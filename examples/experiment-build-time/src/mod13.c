int f13(void) { return 13; }
