"""Synthetic wheels that install like real ML packages: profiles, measuring real wheels, generating, a shared cache, and a wheel's install cost."""
